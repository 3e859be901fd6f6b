// Where a drafting branch's tokens sit in req_to_token, as a kernel row of the mla backend sees
// them during multi-step draft decode.
//
// Where it sits: the mla decode planner turns each (request, branch) into one block-table row
// over "prefix ++ own branch" keys; this file says which req_to_token column key k of that row
// is. Facts from sglang eagle_worker._draft_preprocess_decode / assign_draft_cache_locs
// (research/fa.md §6):
//   - page size 1 or topk 1: branch t's step u is column seq_len + t * steps + u;
//   - page size > 1 and topk > 1: from base = seq_len - seq_len % ps, each branch owns a
//     page-aligned region of ceil((tail + steps) / ps) pages whose first tail = seq_len % ps
//     columns hold that branch's copy of the partial last page, then its drafts.
// Either way, keys [0, base) are the prefix and key k >= base is column branch_start + k - base,
// so key k of a row sits at position k.
//
//   BranchLayout l = branch_layout(seq_len, ps, topk, steps);
//   int32_t column = l.column(branch, key);
#pragma once

#include <cstdint>

namespace kvfuzz::mla {

struct BranchLayout {
  int32_t base = 0;    // first column that differs between branches (page-aligned when region > 0)
  int32_t stride = 0;  // columns between the starts of consecutive branches

  int32_t branch_start(int32_t branch) const { return base + branch * stride; }
  // The req_to_token column of key `key` of the row of `branch`.
  int32_t column(int32_t branch, int32_t key) const { return key < base ? key : branch_start(branch) + key - base; }
};

inline BranchLayout branch_layout(int32_t seq_len, int32_t page_size, int32_t topk, int32_t steps) {
  if (page_size == 1 || topk == 1) return {seq_len, steps};
  const int32_t tail = seq_len % page_size;
  const int32_t pages_per_branch = (tail + steps + page_size - 1) / page_size;
  return {seq_len - tail, pages_per_branch * page_size};
}

}  // namespace kvfuzz::mla
