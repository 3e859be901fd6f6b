// Where multi-step drafting puts each branch's tokens in req_to_token: one production convention
// (sglang speculative/spec_utils.py assign_draft_cache_locs, eagle_worker._draft_preprocess_decode;
// reference/CONVENTIONS.md), shared by the simulator (forward_batch.cc), the planners, their
// metadata checks and CUDA kernels. Plain arithmetic, no dependencies, C++17 for nvcc.
//
//   - page size 1 or topk 1: branch t's step u is column seq_len + t * steps + u;
//   - page size > 1 and topk > 1: from base = seq_len - seq_len % ps each branch owns a
//     page-aligned region of ceil((tail + steps) / ps) pages (tail = seq_len % ps) that starts
//     with its copy of the partial last page (branch 0's is the original), then its drafts.
//
// A branch row is what a kernel row of one branch reads: the prefix, then the branch's drafts, key
// k at position k. Page-granular tables read the partial last page from the branch's region (its
// pages must be whole); token-granular ones read it from the prefix itself.
//
//   DraftLayout l = draft_layout(seq_len, ps, topk, steps);
//   int32_t col = l.column(branch, step);                   // where the draft is stored
//   int32_t id = l.logical_column(branch, step);            // which token it is
//   int32_t key_col = l.key_column(branch, key, table_ps);  // key `key` of the branch row
#pragma once

#include <cstdint>

#include "reference/host_device.h"

namespace kvfuzz {

struct DraftLayout {
  int32_t seq_len = 0;  // the verified prefix
  int32_t steps = 0;    // draft steps per branch
  int32_t topk = 1;     // branches
  int32_t base = 0;     // first column of the branch regions: seq_len, or its last page boundary
  int32_t region = 0;   // columns between consecutive regions: steps, or whole pages
  int32_t tail = 0;     // prefix tokens each region starts with: 0, or seq_len % ps

  // One past the last column the layout allocates.
  KVFUZZ_HD constexpr int32_t end_column() const { return base + topk * region; }
  // First column of `branch`'s region.
  KVFUZZ_HD constexpr int32_t region_start(int32_t branch) const { return base + branch * region; }
  // Column of `branch`'s copy of prefix column base + offset (offset < tail).
  KVFUZZ_HD constexpr int32_t tail_column(int32_t branch, int32_t offset) const {
    return region_start(branch) + offset;
  }
  // Column holding `branch`'s draft of step `step`.
  KVFUZZ_HD constexpr int32_t column(int32_t branch, int32_t step) const { return region_start(branch) + tail + step; }
  // The logical column of that draft (the token's identity, SEMANTICS §2).
  KVFUZZ_HD constexpr int32_t logical_column(int32_t branch, int32_t step) const {
    return seq_len + branch * steps + step;
  }

  // Logical column of key `key` of `branch`'s row.
  KVFUZZ_HD constexpr int32_t key_logical_column(int32_t branch, int32_t key) const {
    return key < seq_len ? key : logical_column(branch, key - seq_len);
  }
  // Column a table of page size `table_page_size` reads key `key` of `branch`'s row from.
  KVFUZZ_HD constexpr int32_t key_column(int32_t branch, int32_t key, int32_t table_page_size) const {
    if (table_page_size > 1) return key < base ? key : region_start(branch) + key - base;
    return key < seq_len ? key : column(branch, key - seq_len);
  }
};

// The layout of one request with `seq_len` verified tokens in a cache of page size `page_size`.
KVFUZZ_HD constexpr DraftLayout draft_layout(int32_t seq_len, int32_t page_size, int32_t topk, int32_t steps) {
  if (page_size == 1 || topk == 1) return {seq_len, steps, topk, seq_len, steps, 0};
  const int32_t tail = seq_len % page_size;
  const int32_t pages = (tail + steps + page_size - 1) / page_size;
  return {seq_len, steps, topk, seq_len - tail, pages * page_size, tail};
}

}  // namespace kvfuzz
