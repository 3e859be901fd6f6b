// Draft decode (multi-step EAGLE drafting) with topk > 1 (flashattention_backend.py; reference/draft_layout.h): for
// full layers a cascade — main (the row's K branch queries over the prefix, non-causal; at
// ps > 1 only its whole pages, s - s % ps) and expand (one row per branch over its own slots:
// at ps = 1 the drafts of steps 0..j, at ps > 1 the branch region's pages, which start with the
// branch's copy of the partial last page: s % ps + j + 1 keys) merged by LSE.
// out_cache_loc is laid out [padded_bs][topk][draft_steps].
//
// Sliding-window and chunked layers: production runs the same non-causal cascade with the
// window, which misplaces it (H2). Here they get one causal row per branch over
// R2T[r, :s] ++ the branch's drafts 0..j (token slots, view page size 1): key index == position,
// so windows and chunks are exact.
#include <algorithm>

#include "backends/fa/fa_planner.h"
#include "backends/fa/fa_tables.h"
#include "reference/draft_layout.h"

namespace kvfuzz::fa {
namespace {

DraftLayout layout_of(const PlanScope& sc, int32_t b) {
  return draft_layout(sc.seq_len(b), sc.ps, sc.fb.topk, sc.fb.draft_steps);
}

int64_t draft_slot(const PlanScope& sc, int32_t b, int32_t t, int32_t u) {
  const ForwardBatch& fb = sc.fb;
  return fb.out_cache_loc[static_cast<size_t>((int64_t{b} * fb.topk + t) * fb.draft_steps + u)];
}

FaCall branch_rows(const PlanScope& sc, bool swa, const std::string& name) {
  const ForwardBatch& fb = sc.fb;
  const int32_t k = fb.topk, step = fb.draft_step;
  const int32_t width = sc.graph ? sc.ctx : sc.max_seq_len() + step + 1;
  FaCall c = make_call(name, name + ".page_table", int64_t{sc.rows} * k, width, 1, /*causal=*/true);
  for (int32_t b = 0; b < sc.rows; ++b) {
    const int32_t s = sc.seq_len(b), r = sc.r2t_row(b);
    for (int32_t t = 0; t < k; ++t) {
      const int32_t row = b * k + t;
      const int64_t off = int64_t{row} * width;
      for (int32_t key = 0; key < s; ++key)
        c.page_table.set(off + key, static_cast<int32_t>(translate_slot(sc.cache, sc.cache.r2t(r, key), swa)));
      for (int32_t u = 0; u <= step; ++u)
        c.page_table.set(off + s + u, static_cast<int32_t>(translate_slot(sc.cache, draft_slot(sc, b, t, u), swa)));
      set_row(c, row, sc.q_offsets[static_cast<size_t>(b)] + t, 1, s + step + 1);
    }
  }
  finish_call(c, sc.rows * k);
  return c;
}

}  // namespace

void plan_draft_tree(const PlanScope& sc, FaPlan& plan) {
  const ForwardBatch& fb = sc.fb;
  const int32_t k = fb.topk, steps = fb.draft_steps, step = fb.draft_step, ps = sc.ps;
  const std::string name = sc.mode + ".topk";

  // Main: K queries per row over the prefix's whole pages.
  std::vector<int32_t> whole_pages;
  for (int32_t b = 0; b < sc.rows; ++b) whole_pages.push_back(layout_of(sc, b).base);
  FaCall main = topk_normal_call(sc, name, k, whole_pages);

  // Expand: eager [bs*K, S]; CUDA graph [max_bs*K, j+2] (the +1 for the copied partial page).
  // At ps > 1 production scatters the pages of all S draft columns (draft_decode_set_expand_metadata),
  // which can overflow j+2 columns (H1); only the pages of steps 0..j are read, and only those
  // are written here: at most ceil((ps - 1 + j + 1) / ps) <= j + 1 pages.
  const int32_t width = sc.graph ? step + 2 : steps;
  FaCall expand =
      make_call(name + "_expand", name + "_expand.page_table", int64_t{sc.rows} * k, width, ps, /*causal=*/false);
  for (int32_t b = 0; b < sc.rows; ++b) {
    const int32_t tail = layout_of(sc, b).tail;
    for (int32_t t = 0; t < k; ++t) {
      const int32_t row = b * k + t;
      int32_t n = 0;
      for (int32_t u = 0; u <= step; ++u) {
        const auto page = static_cast<int32_t>(draft_slot(sc, b, t, u) / ps);  // ps = 1: the slot
        if (ps > 1 && n > 0 && expand.page_table[int64_t{row} * width + n - 1] == page) continue;
        expand.page_table.set(int64_t{row} * width + n++, page);
      }
      set_row(expand, row, sc.q_offsets[static_cast<size_t>(b)] + t, 1, tail + step + 1);
    }
  }
  finish_call(expand, sc.rows * k);
  plan.full.parts.push_back(std::move(main));
  plan.full.parts.push_back(std::move(expand));

  if (sc.sliding_layers) {
    plan.has_sliding = true;
    plan.sliding.parts.push_back(branch_rows(sc, sc.hybrid, name + "_swa"));
  }
  if (!sc.chunks.empty()) {
    const FaCall rows = branch_rows(sc, false, name + "_rows");
    add_local_groups(sc, plan, rows, rows.page_table, rows.width, 1, int64_t{sc.rows} * k);
  }
}

}  // namespace kvfuzz::fa
