// The metadata the mla backend builds: what sglang's MLA backends (FlashMLA, cutlass MLA, AITER
// MLA) hand their kernels.
//
// Where it sits: forward batch -> **mla planner** (mla_plan_decode.cc, mla_plan_prefill.cc) ->
// MlaPlan -> mla executor (mla_executor.cc). One of two shapes, by mode:
//   - latent decode (DECODE, IDLE, TARGET_VERIFY, draft decode): FlashMLA's single-head paged
//     attention over the latent pool: a page-granular block table per kernel row, cache_seqlens,
//     the query tokens of each row, and for verify the tree mask;
//   - prefill (EXTEND, MIXED, DRAFT_EXTEND_V2): MHA over linear per-token K/V: a token CSR over
//     the pool that gathers each row's prefix + new K/V into a batch-local buffer, and the layout
//     descriptor (block_size, kv_indptr, kv_indices) the prefill kernel addresses that buffer by
//     (AITER make_mla_prefill_ps_meta_data).
//
//   auto plan = plan_mla(in);            // mla_planner.h
//   plan->check_metadata(checker);
#pragma once

#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "backends/common/checked_buffer.h"

namespace kvfuzz::mla {

enum class MlaPath : uint8_t { latent_decode, prefill };

// FlashMLA: flash_mla_with_kvcache(q [rows, q_per_row, heads, d], k_cache [-1, ps, 1, d],
// block_table, cache_seqlens, causal). Multi-step drafting keeps one table per step
// (FlashMLAMultiStepDraftBackend) and runs the table of its step.
struct LatentDecodeMeta {
  int32_t rows = 0;              // kernel rows: padded_bs, or padded_bs * topk when drafting
  int32_t row_capacity = 0;      // rows per step the buffers were allocated for
  int32_t width = 0;             // block-table row stride, in pages
  int32_t steps = 1;             // tables held: draft_steps when drafting, else 1
  int32_t step = 0;              // the table this batch runs
  int32_t rows_per_request = 1;  // topk when drafting: kernel row r serves batch row r / topk
  int32_t max_seqlen_q = 1;
  int32_t max_seqlen_k = 0;
  int32_t num_splits = 1;           // split-KV chunks per row, merged by LSE (FlashMLA num_splits)
  bool tree_mask = false;           // verify: custom_mask replaces the causal rule
  // vLLM's CUDA-graph padding: padded kernel rows have no queries and no keys, and the batch's
  // padded tokens lie in no row (sglang's padded rows each read the dummy page)
  bool empty_padded_rows = false;
  Buffer<int32_t> block_table;      // [steps][row_capacity][width], full-pool page ids
  Buffer<int32_t> swa_block_table;  // [steps][row_capacity][width], SWA-pool page ids (hybrid only)
  Buffer<int32_t> cache_seqlens;    // [steps][row_capacity]: keys each row reads
  Buffer<int32_t> cu_seqlens_q;     // [rows + 1]: query tokens of each row
  Buffer<int64_t> mask_indptr;      // verify: [rows + 1]
  Buffer<uint8_t> custom_mask;      // verify: per row q_per_row x cache_seqlens, row-major

  int64_t table_row(int32_t row) const { return (int64_t{step} * row_capacity + row) * width; }
  int64_t seqlen_index(int32_t row) const { return int64_t{step} * row_capacity + row; }
};

// Gather (create_flashinfer_kv_indices_triton over seq_lens: one entry per token, prefix + new)
// then MHA over the linear buffer the gather filled, addressed through the descriptor.
struct PrefillMeta {
  int32_t max_seqlen_q = 0, max_seqlen_k = 0;
  bool empty_padded_rows = false;  // vLLM's padding: padded rows have no queries and no keys
  Buffer<int32_t> qo_indptr;       // [rows + 1]
  Buffer<int32_t> kv_lens;         // [rows]: keys of each row (seq_len)
  Buffer<int32_t> kv_indptr;       // [rows + 1]: gather CSR
  Buffer<int32_t> kv_indices;      // [capacity]: full-pool slot of each gathered token
  Buffer<int32_t> swa_kv_indices;  // [capacity]: the same tokens in the SWA pool (hybrid only)
  // The layout descriptor of the linear K/V: key k of row i is linear entry
  // linear_kv_indices[linear_kv_indptr[i] + k / block_size] * block_size + k % block_size.
  int32_t block_size = 1;
  Buffer<int32_t> linear_kv_indptr;   // [rows + 1]
  Buffer<int32_t> linear_kv_indices;  // [capacity]: arange(total tokens)
};

class MlaPlan : public Plan {
 public:
  MlaPath path = MlaPath::latent_decode;
  int32_t page_size = 1;
  bool hybrid = false;                // SWA layers read the SWA pool
  std::vector<PoolKind> layer_pools;  // [layers]
  Buffer<int32_t> positions;          // [num_tokens]: kernel-side positions (rope; window masks)
  LatentDecodeMeta decode;
  PrefillMeta prefill;

  void check_metadata(MetadataChecker& check) const override;
  void check_guards() const override;
};

}  // namespace kvfuzz::mla
