// Plumbing of FaPlan: which group a layer reads, guard checks. See fa_plan.h.
#include "backends/fa/fa_plan.h"

#include <algorithm>

namespace kvfuzz::fa {

std::vector<int32_t> token_rows(const ForwardBatch& fb) {
  std::vector<int32_t> rows;
  for (int32_t b = 0; b < fb.padded_bs; ++b)
    rows.insert(rows.end(), static_cast<size_t>(fb.extend_lens[static_cast<size_t>(b)]), b);
  return rows;
}

void FaCall::check_guards() const {
  cu_seqlens_q.check_guards();
  cu_seqlens_k.check_guards();
  cache_seqlens.check_guards();
  page_table.check_guards();
  rank_slots.check_guards();
}

const FaGroup& FaPlan::group_of(int32_t layer) const {
  const Layer& l = layers[static_cast<size_t>(layer)];
  if (l.kind == LayerKind::sliding_window && has_sliding) return sliding;
  if (l.kind == LayerKind::chunked) {
    for (const FaGroup& g : local)
      if (g.chunk == l.chunk) return g;
    throw Violation("local_attn_metadata", "no virtual batches were planned for chunk " + std::to_string(l.chunk),
                    {layer, -1, -1});
  }
  return full;
}

void FaPlan::check_guards() const {
  for (const FaCall& c : full.parts) c.check_guards();
  for (const FaCall& c : sliding.parts) c.check_guards();
  for (const FaGroup& g : local)
    for (const FaCall& c : g.parts) c.check_guards();
}

bool FaPlan::merges_by_batch() const {
  // a cascade (common_prefix_len > 0) or decode-context parallelism (dcp_world > 1)
  bool whole =
      full.common_prefix_len > 0 || sliding.common_prefix_len > 0 || full.dcp_world > 1 || sliding.dcp_world > 1;
  for (const FaGroup& g : local) whole |= g.common_prefix_len > 0 || g.dcp_world > 1;
  return whole;
}

int32_t FaPlan::dcp_world() const {
  int32_t world = std::max(full.dcp_world, sliding.dcp_world);
  for (const FaGroup& g : local) world = std::max(world, g.dcp_world);
  return world;
}

}  // namespace kvfuzz::fa
