// The metadata the fa planner builds, modelled on sglang's FlashAttentionBackend
// (flashattention_backend.py): every attention kernel is one flash_attn_with_kvcache call, a
// layer runs one or more calls ("parts", a cascade) and merges them by LSE (merge_state).
//
// Where it sits: forward batch -> fa planner (fa_planner.h) -> **FaPlan** -> fa executor
// (fa_executor.h). check_metadata (fa_check.cc) compares every table with req_to_token.
//
// One call reads, for kernel row b: queries = batch tokens [cu_seqlens_q[b], cu_seqlens_q[b+1]),
// keys k < cache_seqlens[b] at page_table_slot(page_table, b * width, k, view_page_size).
//
//   const FaGroup& g = plan.group_of(layer);
//   for (const FaCall& c : g.parts) run c, merge by LSE;
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/common/checked_buffer.h"
#include "backends/descales.h"

namespace kvfuzz::fa {

// Batch row of each query token of the batch, [num_tokens] (padded rows included).
std::vector<int32_t> token_rows(const ForwardBatch& fb);

// One flash_attn_with_kvcache call.
struct FaCall {
  std::string name;            // production metadata family, e.g. "target_verify.topk_expand"
  int32_t rows = 0;            // kernel rows this forward uses (CUDA graph: padded rows included)
  int32_t width = 0;           // row stride of page_table
  int32_t view_page_size = 1;  // page size of the K/V view: ps for page ids, 1 for token slots
  bool causal = true;          // bottom-right; the layer's window applies on top
  int32_t max_seqlen_q = 0, max_seqlen_k = 0;
  Buffer<int32_t> cu_seqlens_q;   // [row capacity + 1]
  Buffer<int32_t> cu_seqlens_k;   // [row capacity + 1]
  Buffer<int32_t> cache_seqlens;  // [row capacity]
  Buffer<int32_t> page_table;     // [row capacity][width]
  // The attention sinks this call was handed (FlashAttention's s_aux: one logit per q head, in
  // its softmax and so in the LSE it returns); empty: none. Of a group's merged parts, one carries
  // them: the sink joins each query's softmax once.
  std::vector<double> sinks;  // [q_heads] or empty
  // vLLM's CUDA-graph conventions (docs/vllm.md): padded kernel rows have no queries and no keys
  // and the batch's padded tokens lie in no row; max_seqlen_k is an upper bound (max_model_len
  // at capture), not the rows' maximum. Both false for sglang's padding (a dummy-page row each).
  bool empty_padded_rows = false;
  bool max_seqlen_k_upper_bound = false;
  // Decode-context parallelism (FaGroup::dcp_world > 1): one rank's call reads that rank's own pool
  // through its page table (page size view_page_size, the rank's block size); rank_slots[s] is the
  // slot of the layer's pool whose token the rank's slot mapping wrote into its local slot s (-1:
  // none). Empty (capacity 0): the call reads the layer's pool itself.
  Buffer<int64_t> rank_slots{"rank_slots", 0};

  int32_t q_len(int32_t row) const { return cu_seqlens_q[row + 1] - cu_seqlens_q[row]; }
  void check_guards() const;
};

// Which metadata a layer reads.
enum class GroupKind : uint8_t {
  full,     // full-attention layers (and sliding-window layers sharing the full pool's tables)
  sliding,  // sliding-window layers with their own tables (SWA pool, or exact-window spec rows)
  local,    // chunked layers: virtual batches of one chunk size
};

struct FaGroup {
  GroupKind kind = GroupKind::full;
  int32_t chunk = 0;          // local only
  std::vector<FaCall> parts;  // merged by LSE in this order
  // > 0: the group runs as a cascade over the batch's common prefix (vLLM's cascade attention):
  // parts[0] is one kernel row holding every real query token, not causal, reading keys
  // [0, common_prefix_len) that every request shares; parts[1] one row per request, causal, reading
  // its keys from common_prefix_len on (its table row starts at that key).
  int32_t common_prefix_len = 0;
  // > 1: vLLM's decode-context parallelism over dcp_world ranks with interleave dcp_interleave
  // (tokens (p / I) % R == r on rank r): parts[r] (r < R) is rank r's call over its local context
  // keys (not causal, through its rank_slots), parts[R] the step's new tokens (causal, the layer's
  // pool); a batch with no context to read may run parts[R] alone. Merged by LSE like any parts.
  int32_t dcp_world = 1;
  int32_t dcp_interleave = 1;
  // local only: its virtual batches split full.parts[0]'s rows (their cu_seqlens_q and
  // cache_seqlens), so check_metadata checks those lengths even where no layer reads `full`. The
  // built-in planner's provenance; not carried by the contract (false for an adapter's plan).
  bool splits_full = false;
};

struct FaPlan : Plan {
  std::vector<Layer> layers;  // the model's layers (window and chunk per layer)
  FaGroup full;
  bool has_sliding = false;  // false: sliding-window layers read `full`
  FaGroup sliding;
  std::vector<FaGroup> local;  // one per chunk size of the model
  // One per layer where the planner recorded a quantized cache's descales (FlashAttention's
  // q/k/v_descale, float32 [rows][kv_heads] per call; vLLM's --kv-cache-dtype fp8: descales.h);
  // empty: the kernel reads the cache by the layer's own scales (Layer::k_scale), as kvfuzz's
  // planner and sglang's calls state nothing of them.
  std::vector<LayerDescales> descales;

  const FaGroup& group_of(int32_t layer) const;
  void check_metadata(MetadataChecker& check) const override;
  void check_guards() const override;
  bool merges_by_batch() const override;  // a group runs as a cascade (common_prefix_len > 0)
  int32_t dcp_world() const override;     // the largest of its groups' dcp_world
};

}  // namespace kvfuzz::fa
