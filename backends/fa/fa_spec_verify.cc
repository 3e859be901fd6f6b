// TARGET_VERIFY with topk > 1 (SEMANTICS.md §4; flashattention_backend.py): a cascade for full layers — main
// (each draft attends the prefix, non-causal) and expand (one row per draft over its
// tree-visible drafts, compacted to the front of a [bs*D, D] token-slot table read with a
// page-size-1 view) merged by LSE — and, for sliding-window and chunked layers, one row per
// draft over prefix ++ visible drafts (production: prepare_swa_spec_page_table_triton, which
// asserts ps == 1; here a token-granular row read with view page size 1, for any ps).
// The visible drafts are the draft's ancestors and itself in index order, which is depth order,
// so key index == position in these rows and windows and chunks are exact.
#include <algorithm>

#include "backends/fa/fa_faults.h"
#include "backends/fa/fa_planner.h"
#include "backends/fa/fa_tables.h"

namespace kvfuzz::fa {
namespace {

// visible[b * D + j]: draft columns c (ascending) that draft j of row b sees, from the flat mask.
std::vector<std::vector<int32_t>> tree_visibility(const PlanScope& sc) {
  const ForwardBatch& fb = sc.fb;
  const int32_t d = fb.draft_tokens;
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(sc.rows) * d);
  int64_t row_start = 0;  // exclusive prefix sum of (s + D) repeated D times
  for (int32_t b = 0; b < sc.rows; ++b) {
    const int32_t s = sc.seq_len(b);
    for (int32_t j = 0; j < d; ++j, row_start += s + d) {
      for (int32_t c = 0; c < d; ++c) {
        // Padded CUDA-graph rows read custom_mask[0] (their extraction indices are zeroed).
        const int64_t at = b < fb.bs ? row_start + s + c : 0;
        if (fb.custom_mask[static_cast<size_t>(at)]) out[static_cast<size_t>(b * d + j)].push_back(c);
      }
    }
  }
  return out;
}

// One row per draft: R2T[r, :s] ++ R2T[r, s + visible drafts], token slots, causal.
FaCall combined_rows(const PlanScope& sc, const std::vector<std::vector<int32_t>>& visible, bool swa,
                     const std::string& name) {
  const int32_t d = sc.fb.draft_tokens;
  // CUDA graph: target_verify_metadata_topk_swa.page_table [max_bs * D, context_len].
  const int32_t width = sc.graph ? sc.ctx : sc.max_seq_len() + d;
  FaCall c = make_call(name, name + ".page_table", int64_t{sc.rows} * d, width, 1, /*causal=*/true);
  for (int32_t b = 0; b < sc.rows; ++b) {
    const int32_t s = sc.seq_len(b), r = sc.r2t_row(b);
    for (int32_t j = 0; j < d; ++j) {
      const int32_t row = b * d + j;
      const std::vector<int32_t>& vis = visible[static_cast<size_t>(row)];
      const int64_t off = int64_t{row} * width;
      for (int32_t k = 0; k < s; ++k)
        c.page_table.set(off + k, static_cast<int32_t>(translate_slot(sc.cache, sc.cache.r2t(r, k), swa)));
      for (size_t i = 0; i < vis.size(); ++i)
        c.page_table.set(off + s + static_cast<int64_t>(i),
                         static_cast<int32_t>(translate_slot(sc.cache, sc.cache.r2t(r, s + vis[i]), swa)));
      set_row(c, row, sc.q_offsets[static_cast<size_t>(b)] + j, 1, s + static_cast<int32_t>(vis.size()));
    }
  }
  finish_call(c, sc.rows * d);
  return c;
}

}  // namespace

void plan_verify_tree(const PlanScope& sc, FaPlan& plan) {
  const ForwardBatch& fb = sc.fb;
  const int32_t d = fb.draft_tokens, ps = sc.ps;
  const std::string name = sc.mode + ".topk";

  // Main: D queries per row over the prefix.
  std::vector<int32_t> prefix;
  for (int32_t b = 0; b < sc.rows; ++b) prefix.push_back(sc.seq_len(b));
  FaCall main = topk_normal_call(sc, name, d, prefix);

  // Expand: one query per draft; its visible drafts first (stable order), then the others.
  const std::vector<std::vector<int32_t>> visible = tree_visibility(sc);
  const int32_t view = sc.in.fault(kFaultExpandPagedView) ? ps : 1;
  FaCall expand =
      make_call(name + "_expand", name + "_expand.page_table", int64_t{sc.rows} * d, d, view, /*causal=*/false);
  for (int32_t b = 0; b < sc.rows; ++b) {
    const int32_t s = sc.seq_len(b), r = sc.r2t_row(b);
    for (int32_t j = 0; j < d; ++j) {
      const int32_t row = b * d + j;
      const std::vector<int32_t>& vis = visible[static_cast<size_t>(row)];
      std::vector<int32_t> order = vis;
      for (int32_t c = 0; c < d; ++c)
        if (!std::binary_search(vis.begin(), vis.end(), c)) order.push_back(c);
      for (int32_t i = 0; i < d; ++i)
        expand.page_table.set(int64_t{row} * d + i, sc.cache.r2t(r, s + order[static_cast<size_t>(i)]));
      set_row(expand, row, sc.q_offsets[static_cast<size_t>(b)] + j, 1, static_cast<int32_t>(vis.size()));
    }
  }
  finish_call(expand, sc.rows * d);
  plan.full.parts.push_back(std::move(main));
  plan.full.parts.push_back(std::move(expand));

  // Sliding-window layers: exact windows on prefix ++ visible drafts, in the SWA pool if any.
  if (sc.sliding_layers) {
    plan.has_sliding = true;
    const bool translate = sc.hybrid && !sc.in.fault(kFaultSwaSpecUntranslated);
    plan.sliding.parts.push_back(combined_rows(sc, visible, translate, name + "_swa"));
  }
  // Chunked layers: production leaves local attention off here (H3); virtual batches over the
  // same combined rows keep them exact.
  if (!sc.chunks.empty()) {
    const FaCall rows = combined_rows(sc, visible, false, name + "_rows");
    add_local_groups(sc, plan, rows, rows.page_table, rows.width, 1, int64_t{sc.rows} * d);
  }
}

}  // namespace kvfuzz::fa
