// The fa planner: builds, per forward, what sglang's FlashAttentionBackend.init_forward_metadata
// (eager) or init_forward_metadata_replay_cuda_graph (CUDA graph) builds — for full layers, for
// sliding-window layers and for chunked layers — following SEMANTICS.md §4.
//
// Where it sits: forward batch + cache state -> **plan_fa** -> FaPlan -> fa executor.
//   - plan_paged (fa_planner.cc): one causal call over a page table: decode, extend, mixed,
//     draft_extend_v2, target_verify with topk = 1, draft decode with topk = 1, idle.
//   - plan_verify_tree / plan_draft_tree (fa_spec_verify.cc, fa_spec_draft.cc): topk > 1 cascades.
//   - add_local_groups: chunked layers (fa_local.h) from any base call.
//
//   std::unique_ptr<FaPlan> plan = plan_fa(in);
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/fa/fa_plan.h"

namespace kvfuzz::fa {

// What every builder reads.
struct PlanScope {
  explicit PlanScope(const PlanInput& input);

  const PlanInput& in;
  const ForwardBatch& fb;
  const CacheState& cache;
  int32_t ps = 1;
  int32_t rows = 0;  // padded_bs: CUDA graphs run their padded rows too
  int32_t ctx = 0;   // max_context_len: the capture-time width
  bool graph = false;
  bool hybrid = false;             // an SWA pool exists
  bool sliding_layers = false;     // the model has sliding-window layers
  std::vector<int32_t> chunks;     // distinct chunk sizes of chunked layers
  std::string mode;                // buffer name prefix
  std::vector<int32_t> q_offsets;  // [rows + 1]: first batch token of each row

  int32_t r2t_row(int32_t b) const { return fb.req_pool_indices[static_cast<size_t>(b)]; }
  int32_t seq_len(int32_t b) const { return fb.seq_lens[static_cast<size_t>(b)]; }
  int32_t max_seq_len() const;  // over all rows, padded ones included (their fill value)
};

std::unique_ptr<FaPlan> plan_fa(const PlanInput& in);

void plan_paged(const PlanScope& sc, FaPlan& plan);
// The model's attention sinks on each group's first part (s_aux of the call whose LSE the merge
// starts from; fa_sink_every_part: on every part).
void attach_sinks(const PlanInput& in, FaPlan& plan);
void plan_verify_tree(const PlanScope& sc, FaPlan& plan);
void plan_draft_tree(const PlanScope& sc, FaPlan& plan);

// The topk > 1 cascades' main call, "<name>_normal": q_per_row queries of row b over k_lens[b]
// keys of its prefix pages (R2T[:, :max s] strided and divided), non-causal.
FaCall topk_normal_call(const PlanScope& sc, const std::string& name, int32_t q_per_row,
                        const std::vector<int32_t>& k_lens);

// One local group per chunk size, splitting `base` whose rows read `table` (page size `page_size`).
void add_local_groups(const PlanScope& sc, FaPlan& plan, const FaCall& base, const Buffer<int32_t>& table,
                      int32_t table_width, int32_t page_size, int64_t base_row_capacity);

}  // namespace kvfuzz::fa
