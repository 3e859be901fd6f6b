// The metadata the FlashInfer planner hands its executor: one WrapperPlan per FlashInfer wrapper
// call (BatchDecode/BatchPrefillWithPagedKVCacheWrapper, BatchPrefillWithRaggedKVCacheWrapper),
// grouped by the attention configuration of the layers that run it.
//
// Where it sits: forward batch -> planner (flashinfer_planner.cc) -> **this plan** -> executor
// (flashinfer_executor.cc), checked by check_metadata (flashinfer_check.cc). The arrays are the
// ones FlashInfer's plan() takes (include/flashinfer/page.cuh paged_kv_t: indptr, indices,
// last_page_len) at a kernel page size that is 1 for sglang's planning (`flashinfer`) or the
// cache's page size (`flashinfer_paged`).
//
//   const WrapperPlan& w = plan.groups[plan.group_of_layer[layer]].calls[0];
//   int64_t kv_len = paged_csr_length(w.kv_indptr[r + 1] - w.kv_indptr[r], w.kv_last_page_len[r], w.page_size);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/common/checked_buffer.h"
#include "backends/descales.h"

namespace kvfuzz::flashinfer {

// Where a wrapper call's keys come from, and which extent its rows must cover (for the checks).
enum class Role : uint8_t {
  decode,       // DECODE / IDLE: paged, one query per request over its (window/chunk-trimmed) keys
  draft,        // draft decode: paged, one row per (request, branch): prefix ++ own draft steps
  verify,       // TARGET_VERIFY: paged over prefix + D drafts, tree custom mask
  prefix,       // ragged-style EXTEND / MIXED: paged over the cached prefix, non-causal
  ragged,       // ragged-style EXTEND / MIXED: the new tokens' K/V from the batch, causal
  full_extend,  // paged EXTEND over the whole seq_len (CUDA graph), DRAFT_EXTEND_V2
};

std::string to_string(Role r);

// Which merge_state kernel combines the ragged and paged parts of an extend.
enum class MergeKernel : uint8_t {
  flashinfer_base2,  // FlashInfer cascade.cuh MergeState: exp2/log2 on its base-2 LSEs
  natural_exp,       // sglang triton_ops/merge_state.py fallback: exp/log (wrong on base-2 LSEs)
};

// One FlashInfer wrapper call as planned. Rows are kernel rows: batch rows, or (batch row,
// branch) pairs for multi-branch drafting; padded CUDA-graph rows included.
struct WrapperPlan {
  Role role = Role::decode;
  int32_t page_size = 1;         // the kernel's page size (paged calls)
  int32_t rows = 0;
  int32_t rows_per_batch_row = 1;  // topk for draft decode
  bool causal = true;            // bottom-right causal; ignored when has_mask
  int32_t window_left = -1;      // FlashInfer window_left: keys >= query index - window_left
  bool has_mask = false;         // custom_mask decides visibility
  bool empty_padded_rows = false;  // vLLM's CUDA-graph padding: padded rows read no keys (sglang's: the dummy page)

  Buffer<int32_t> qo_indptr;         // [rows + 1] batch query tokens of each row
  Buffer<int32_t> kv_indptr;         // [rows + 1] pages (paged) or batch tokens (ragged)
  Buffer<int32_t> kv_indices;        // [pages] page ids of the layer's pool (paged)
  Buffer<int32_t> kv_last_page_len;  // [rows] keys on each row's last page, 1..page_size (paged)
  Buffer<uint8_t> custom_mask;       // [sum over rows of q_len * kv_len], row-major per row
  Buffer<int32_t> mask_indptr;       // [rows + 1] offsets into custom_mask

  bool paged() const { return role != Role::ragged; }
};

// The calls that the layers of one attention configuration run (sglang keeps one wrapper set
// for window layers and one for full layers; kvfuzz one per distinct Layer).
struct LayerGroupPlan {
  Layer layer;                     // kind, window, chunk shared by the group's layers
  std::vector<WrapperPlan> calls;  // merged in order by the plan's merge kernel
};

class FlashInferPlan final : public Plan {
 public:
  int32_t page_size = 1;  // kernel page size of every paged call
  MergeKernel merge = MergeKernel::flashinfer_base2;
  std::vector<LayerGroupPlan> groups;
  std::vector<int32_t> group_of_layer;  // [layers]
  // One per layer where the planner recorded an fp8 cache's scales (FlashInfer's run(q_scale,
  // k_scale, v_scale), each call's scalars over its rows and KV heads; vLLM's --kv-cache-dtype fp8:
  // descales.h); empty: the cache is read by the layer's own scales (Layer::k_scale).
  std::vector<LayerDescales> descales;

  void check_metadata(MetadataChecker& check) const override;
  void check_guards() const override;
};

}  // namespace kvfuzz::flashinfer
