// How many KV splits each decode-kernel row of sglang's Triton backend gets
// (TritonAttnBackend.get_num_kv_splits, triton_backend.py; the kernel is get_num_kv_splits_triton
// in triton_ops/metadata.py).
//
// Where it sits: triton_planner.cc fills each CSR's num_kv_splits buffer with it; the executor cuts
// rows into splits with triton_split_range.h.
//
// Static (SGLANG_TRITON_DECODE_ATTN_STATIC_KV_SPLITS, or no SM count): every row max_kv_splits.
// Adaptive (production's default), over the lengths of the batch's requests:
//   lo, hi = min, max length; lo = hi when hi * 8 < lo * 10 (lengths within 25 % of each other);
//   splits1 = min(ceil(hi / lo), max_kv_splits),           chunk1 = ceil(hi / splits1);
//   cores   = int(sms * max(log2(hi / 64), 1));
//   grid    = seqs * group * heads                          (MHA: one program per head)
//           = seqs * group * ceil(heads / min(16, heads / kv_heads))   (GQA: BLOCK_H heads each);
//   splits2 = min(ceil(cores / grid), max_kv_splits),      chunk2 = ceil(hi / splits2);
//   request i: max(ceil(len_i / chunk1), ceil(len_i / chunk2)), stored for each of its `group`
//   rows (the topk branches of draft decode).
// Every value lies in [1, max_kv_splits], the split dimension of attn_logits / attn_lse.
//
// The lengths are those of all rows the kernel runs, padded CUDA-graph rows (fill length 1)
// included, so padding and unrelated requests change a request's split count and, within
// rounding, its output: adaptive splitting is batch-variant (sglang's deterministic mode exists
// because of it). Production takes log2 in fp32 on the GPU (an approximate lg2); here it is
// double, which differs only where cores lands within rounding of an integer.
//
//   std::vector<int32_t> s = triton_kv_splits(seq_lens, /*group=*/1, {.max_kv_splits = 8, .device_sms = 132,
//                                                                       .q_heads = 32, .kv_heads = 8});
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvfuzz {

struct SplitConfig {
  int32_t max_kv_splits = 1;  // server arg triton_attention_num_kv_splits (the scenario's kv_splits)
  int32_t device_sms = 0;     // get_device_core_count(); 0 = static splits
  int32_t q_heads = 1, kv_heads = 1;
};

// [lens.size() * group]: the split count of each kernel row, request-major. A length below 1
// (no decode row has one) counts as 1.
std::vector<int32_t> triton_kv_splits(std::span<const int32_t> lens, int32_t group, const SplitConfig& c);

}  // namespace kvfuzz
