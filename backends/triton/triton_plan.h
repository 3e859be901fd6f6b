// The metadata sglang's TritonAttnBackend builds for one forward batch, as plain checked buffers.
//
// Where it sits: forward batch -> planner (triton_planner.cc) -> **TritonPlan** -> executor
// (triton_executor.cc), and check_metadata (triton_check.cc). Token CSRs throughout: kv_indptr
// over kernel rows, kv_indices holding req_to_token slots (int64, token granularity, never divided
// by the page size). One CSR per way of choosing keys:
//   csrs[0]     "full": the full causal keys (kv_indptr / kv_indices of triton_backend.py);
//   one per distinct sliding window W: the last keys of the window (window_kv_indptr /
//               window_kv_indices / window_kv_offsets), slots translated full -> SWA for the SWA
//               pool of a hybrid model;
//   one per distinct chunk C (Llama-4 local attention): no production Triton path; the natural
//               window-style CSR starting at the chunk start.
// Kernels:
//   decode  (DECODE, IDLE with padding, draft decode): one query per kernel row, split-KV over
//           num_kv_splits; the CSR lists exactly the keys the query sees (no mask in the kernel);
//   extend  (EXTEND, MIXED, TARGET_VERIFY, DRAFT_EXTEND_V2): one kernel row per request; the CSR
//           covers the prefix only, the new tokens' K/V come from the batch tensors; stage 1
//           (prefix) and stage 2 (new tokens: causal, or the verify custom mask) form ONE softmax;
//           window / chunk layers add the in-kernel mask on positions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/common/checked_buffer.h"

namespace kvfuzz {

enum class TritonKernel : uint8_t { none, decode, extend };

// One token CSR and the rule that chose its keys.
struct KvCsr {
  LayerKind kind = LayerKind::full;  // full, sliding_window or chunked
  int32_t window_or_chunk = 0;       // sliding_window: the radius W; chunked: the chunk C; full: 0
  PoolKind pool = PoolKind::full;  // slots of kv_indices live in this pool
  Buffer<int32_t> kv_indptr;       // [rows + 1]
  Buffer<int64_t> kv_indices;      // [capacity]: token slots, row r at kv_indptr[r] ..
  Buffer<int32_t> kv_offsets;      // [rows]: req_to_token column of each row's first key
  Buffer<int32_t> num_kv_splits;   // [rows]: decode kernel, splits per row (window_num_kv_splits
                                   // for windows; triton_kv_splits.h)

  // Buffer name of `field` in this CSR: "kv_indices", "window_kv_indices(W=4)", ...
  std::string name(const std::string& field) const;
};

class TritonPlan final : public Plan {
 public:
  Mode mode = Mode::idle;
  TritonKernel kernel = TritonKernel::none;
  bool graph = false;  // CUDA-graph replay: buffers sized at capture
  int32_t bs = 0, padded_bs = 0;
  int32_t rows = 0;                 // kernel rows: padded_bs, or padded_bs * topk for draft decode
  int32_t queries_per_request = 1;  // decode kernel: topk for draft decode, else 1
  int32_t max_kv_splits = 1;        // MAX_KV_SPLITS: attn_logits' split dimension (the scenario's kv_splits)
  bool use_custom_mask = false;     // TARGET_VERIFY
  // Attention sinks handed to the kernels (sinks: one logit per q head), empty: none. The decode
  // kernel adds e^sink to the row sum in its stage 2, after the splits are merged
  // (decode_attention.py's _fwd_kernel_stage2); the extend kernel after its last key block.
  std::vector<double> sinks;  // [q_heads] or empty

  std::vector<KvCsr> csrs;         // [0] = full, then one per window / chunk
  std::vector<int32_t> layer_csr;  // [layers]: which CSR each layer reads
  Buffer<int32_t> qo_indptr;       // [padded_bs + 1]: extend kernel, query tokens per request
  Buffer<int32_t> positions;       // [num_tokens]: q/k positions of the batch tokens (masks)
  Buffer<int64_t> mask_indptr;     // [padded_bs + 1]: TARGET_VERIFY, D * (seq_len + D) each
  Buffer<uint8_t> custom_mask;     // [capacity]: TARGET_VERIFY tree mask, row-major per request

  const KvCsr& csr_of(int32_t layer) const { return csrs[static_cast<size_t>(layer_csr[static_cast<size_t>(layer)])]; }

  void check_metadata(MetadataChecker& check) const override;
  void check_guards() const override;
};

}  // namespace kvfuzz
