// Index arithmetic of sglang's Triton attention kernels, shared by the planner, the executor and
// the metadata checks (and by a CUDA port later: everything is KVFUZZ_HD).
//
// Where it sits: planner -> **token CSR / split-KV arithmetic** -> executor. Two facts live here:
//   - split-KV decode (triton_ops/decode_attention.py, _fwd_kernel_stage1 / _fwd_kernel_stage2):
//     a row of kv_len keys and s splits is cut into chunks of ceil32(ceil(kv_len / s)) keys
//     (MIN_BLOCK_KV = 32); split i covers [chunk * i, min(chunk * (i + 1), kv_len)) and is skipped
//     in both stages when empty, so fewer than s splits may carry keys (kv_len 33, s 8: two);
//   - the EAGLE multi-step drafting layout (speculative/spec_utils.py, assign_draft_cache_locs and
//     generate_draft_decode_kv_indices): branch t's draft of step u sits at req_to_token column
//     seq_len + t * steps + u, except with page_size > 1 and topk > 1, where each branch owns whole
//     pages starting at the prefix's last page boundary and begins with a copy of the partial last
//     page (lpl = seq_len % ps tokens), so its step u sits at base + t * pages * ps + lpl + u.
//
//   int64_t chunk = split_chunk_len(kv_len, num_kv_splits[row]);
//   SplitRange r = split_range(kv_len, num_kv_splits[row], split);   // r.empty(): skipped
//   int32_t col = draft_branch_column(seq_len, ps, topk, steps, branch, step);
#pragma once

#include <cstdint>

#include "backends/common/paged_view.h"

namespace kvfuzz {

inline constexpr int32_t kMinBlockKv = 32;  // decode_attention.py MIN_BLOCK_KV

// Keys per split: ceil(ceil(kv_len / splits) / 32) * 32.
KVFUZZ_HD int64_t split_chunk_len(int64_t kv_len, int32_t splits) {
  const int64_t per = (kv_len + splits - 1) / splits;
  return (per + kMinBlockKv - 1) / kMinBlockKv * kMinBlockKv;
}

struct SplitRange {
  int64_t begin = 0, end = 0;  // keys [begin, end) of the row
  KVFUZZ_HD bool empty() const { return end <= begin; }
};

// The keys split `split` of a row handles (stage 1 and stage 2 recompute the same range).
KVFUZZ_HD SplitRange split_range(int64_t kv_len, int32_t splits, int32_t split) {
  const int64_t chunk = split_chunk_len(kv_len, splits);
  const int64_t begin = chunk * split;
  const int64_t end = begin + chunk < kv_len ? begin + chunk : kv_len;
  return {begin, end};
}

// req_to_token column of branch `branch`'s draft token of step `step` (multi-step drafting with
// `topk` branches and `steps` steps after a prefix of `seq_len` tokens).
KVFUZZ_HD int32_t draft_branch_column(int32_t seq_len, int32_t page_size, int32_t topk, int32_t steps, int32_t branch,
                                      int32_t step) {
  if (page_size == 1 || topk == 1) return seq_len + branch * steps + step;
  const int32_t last_page_len = seq_len % page_size;
  const int32_t pages_per_branch = (last_page_len + steps + page_size - 1) / page_size;
  return seq_len - last_page_len + branch * pages_per_branch * page_size + last_page_len + step;
}

// The logical column (the token's identity, SEMANTICS §2) of that draft token.
KVFUZZ_HD int32_t draft_logical_column(int32_t seq_len, int32_t steps, int32_t branch, int32_t step) {
  return seq_len + branch * steps + step;
}

}  // namespace kvfuzz
