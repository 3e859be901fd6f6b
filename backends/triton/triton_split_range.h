// Split-KV arithmetic of sglang's Triton decode kernel, shared by the executor and the tests (and
// by a CUDA port later: everything is KVFUZZ_HD). The drafting layout the planner's rows follow is
// reference/draft_layout.h.
//
// Where it sits: planner -> token CSR -> **split-KV arithmetic** -> executor
// (triton_ops/decode_attention.py, _fwd_kernel_stage1 / _fwd_kernel_stage2): a row of kv_len keys
// and s splits is cut into chunks of ceil32(ceil(kv_len / s)) keys (MIN_BLOCK_KV = 32); split i
// covers [chunk * i, min(chunk * (i + 1), kv_len)) and is skipped in both stages when empty, so
// fewer than s splits may carry keys (kv_len 33, s 8: two).
//
//   int64_t chunk = split_chunk_len(kv_len, num_kv_splits[row]);
//   SplitRange r = split_range(kv_len, num_kv_splits[row], split);   // r.empty(): skipped
#pragma once

#include <cstdint>

#include "reference/host_device.h"

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

}  // namespace kvfuzz
