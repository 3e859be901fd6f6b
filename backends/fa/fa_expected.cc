// See fa_expected.h.
#include "backends/fa/fa_expected.h"

#include "reference/draft_layout.h"

namespace kvfuzz::fa {
namespace {

size_t at(int32_t i) { return static_cast<size_t>(i); }

bool tree_mode(const ForwardBatch& fb) {
  return fb.topk > 1 && (fb.mode == Mode::target_verify || fb.mode == Mode::draft_decode);
}

// Keys of a paged row: everything written up to and including the row's last query.
int32_t written_extent(const ForwardBatch& fb, int32_t b) {
  const int32_t committed = fb.prefix_lens[at(b)];
  if (fb.mode == Mode::draft_decode) return committed + fb.draft_step + 1;  // topk = 1: drafts after the prefix
  if (fb.mode == Mode::draft_q_only) return committed;  // its query is the last committed token: no new key
  return committed + fb.extend_lens[at(b)];                                 // verify: + D; draft_extend_v2: + extend
}

std::vector<ExpectedRow> paged_rows(const ForwardBatch& fb) {
  std::vector<ExpectedRow> rows;
  for (int32_t b = 0; b < fb.bs; ++b) rows.push_back({b, fb.extend_lens[at(b)], 0, written_extent(fb, b), {}});
  return rows;
}

// Draft columns each tree draft sees: from the flat mask, D rows of (prefix + D) columns per
// request.
std::vector<std::vector<ExpectedKey>> verify_visible(const ForwardBatch& fb) {
  const int32_t d = fb.draft_tokens;
  std::vector<std::vector<ExpectedKey>> out;
  size_t base = 0;
  for (int32_t b = 0; b < fb.bs; ++b) {
    const int32_t s = fb.prefix_lens[at(b)];
    for (int32_t j = 0; j < d; ++j) {
      std::vector<ExpectedKey> cols;
      for (int32_t c = 0; c < d; ++c)
        if (fb.custom_mask[base + at(j * (s + d) + s + c)]) cols.push_back({s + c, s + c});
      out.push_back(std::move(cols));
    }
    base += at(d * (s + d));
  }
  return out;
}

std::vector<ExpectedPart> verify_parts(const ForwardBatch& fb, GroupKind kind) {
  const int32_t d = fb.draft_tokens;
  const auto visible = verify_visible(fb);
  if (kind != GroupKind::full) {  // prefix ++ visible drafts, one row per draft
    ExpectedPart rows{1, true, {}};
    for (int32_t b = 0; b < fb.bs; ++b)
      for (int32_t j = 0; j < d; ++j) rows.rows.push_back({b, 1, 0, fb.prefix_lens[at(b)], visible[at(b * d + j)]});
    return {rows};
  }
  ExpectedPart main{fb.page_size, false, {}}, expand{1, false, {}};
  for (int32_t b = 0; b < fb.bs; ++b) {
    main.rows.push_back({b, d, 0, fb.prefix_lens[at(b)], {}});
    for (int32_t j = 0; j < d; ++j) expand.rows.push_back({b, 1, 0, 0, visible[at(b * d + j)]});
  }
  return {main, expand};
}

// The drafting layout of one request (reference/draft_layout.h).
DraftLayout layout_of(const ForwardBatch& fb, int32_t b) {
  return draft_layout(fb.prefix_lens[at(b)], fb.page_size, fb.topk, fb.draft_steps);
}

std::vector<ExpectedPart> draft_parts(const ForwardBatch& fb, GroupKind kind) {
  const int32_t k = fb.topk, step = fb.draft_step, ps = fb.page_size;
  // Branch t's drafts 0..step, held in its region.
  auto drafts = [&](const DraftLayout& l, int32_t t, ExpectedRow& r) {
    for (int32_t u = 0; u <= step; ++u) r.keys.push_back({l.logical_column(t, u), l.column(t, u)});
  };
  if (kind != GroupKind::full) {  // prefix ++ own drafts, one row per branch
    ExpectedPart rows{1, true, {}};
    for (int32_t b = 0; b < fb.bs; ++b) {
      for (int32_t t = 0; t < k; ++t) {
        ExpectedRow r{b, 1, 0, fb.prefix_lens[at(b)], {}};
        drafts(layout_of(fb, b), t, r);
        rows.rows.push_back(std::move(r));
      }
    }
    return {rows};
  }
  // Main: the prefix's whole pages; expand: each branch's region, its tail copy then its drafts.
  ExpectedPart main{ps, false, {}}, expand{ps, false, {}};
  for (int32_t b = 0; b < fb.bs; ++b) {
    const DraftLayout l = layout_of(fb, b);
    main.rows.push_back({b, k, 0, l.base, {}});
    for (int32_t t = 0; t < k; ++t) {
      ExpectedRow r{b, 1, 0, 0, {}};
      for (int32_t c = 0; c < l.tail; ++c) r.keys.push_back({l.base + c, l.tail_column(t, c)});
      drafts(l, t, r);
      expand.rows.push_back(std::move(r));
    }
  }
  return {main, expand};
}

// Chunked layers: the queries of a row grouped by the chunk their position falls in; each group
// reads its chunk's keys up to its last query. Rows here have key index == position.
ExpectedPart local_part(const std::vector<ExpectedRow>& base, int32_t chunk, int32_t view) {
  ExpectedPart out{view, true, {}};
  for (const ExpectedRow& r : base) {
    const int32_t end = r.k_len();
    for (int32_t first_q = end - r.q_len; first_q < end;) {
      const int32_t start = first_q / chunk * chunk;
      const int32_t last = std::min(end, start + chunk);
      ExpectedRow v{r.batch_row, last - first_q, 0, 0, {}};
      if (start < r.run) {
        v.first_column = r.first_column + start;
        v.run = std::min(r.run, last) - start;
      }
      // Keys past the run: the row's draft keys from max(start, run) to last.
      for (int32_t key = std::max(start, r.run); key < last; ++key) v.keys.push_back(r.keys[at(key - r.run)]);
      out.rows.push_back(std::move(v));
      first_q = last;
    }
  }
  return out;
}

// vLLM's cascade attention: the common prefix once for the whole batch (one row, not causal: every
// query lies past it), then each row's keys after it, causal; merged by LSE.
std::vector<ExpectedPart> cascade_parts(const ForwardBatch& fb, int32_t common_prefix_len) {
  ExpectedPart prefix{fb.page_size, false, {}, true}, suffix{fb.page_size, true, {}, false};
  for (const ExpectedRow& r : paged_rows(fb)) {
    prefix.rows.push_back({r.batch_row, r.q_len, 0, common_prefix_len, {}});
    suffix.rows.push_back({r.batch_row, r.q_len, common_prefix_len, r.run - common_prefix_len, {}});
  }
  return {prefix, suffix};
}

}  // namespace

std::vector<ExpectedPart> dcp_parts(const ForwardBatch& fb, int32_t world, int32_t interleave, bool with_context) {
  std::vector<ExpectedPart> parts;
  for (int32_t r = 0; with_context && r < world; ++r) {
    ExpectedPart rank{fb.page_size / world, false, {}, false, r};
    for (int32_t b = 0; b < fb.bs; ++b) {
      ExpectedRow row{b, fb.extend_lens[at(b)], 0, 0, {}};
      const int32_t context = fb.prefix_lens[at(b)];
      for (int32_t k = 0;; ++k) {
        const int32_t column = k / interleave * world * interleave + r * interleave + k % interleave;
        if (column >= context) break;
        row.keys.push_back({column, column});
      }
      rank.rows.push_back(std::move(row));
    }
    parts.push_back(std::move(rank));
  }
  ExpectedPart step{1, true, {}};
  for (int32_t b = 0; b < fb.bs; ++b)
    step.rows.push_back({b, fb.extend_lens[at(b)], fb.prefix_lens[at(b)], fb.extend_lens[at(b)], {}});
  parts.push_back(std::move(step));
  return parts;
}

std::vector<ExpectedPart> expected_parts(const ForwardBatch& fb, GroupKind kind, int32_t chunk,
                                         int32_t common_prefix_len) {
  const bool tree = tree_mode(fb);
  if (common_prefix_len > 0 && !tree && kind != GroupKind::local) return cascade_parts(fb, common_prefix_len);
  if (kind == GroupKind::local) {
    const std::vector<ExpectedPart> base = tree ? (fb.mode == Mode::target_verify ? verify_parts(fb, GroupKind::sliding)
                                                                                  : draft_parts(fb, GroupKind::sliding))
                                                : std::vector<ExpectedPart>{{fb.page_size, true, paged_rows(fb)}};
    return {local_part(base.front().rows, chunk, base.front().view_page_size)};
  }
  if (!tree) return {{fb.page_size, true, paged_rows(fb)}};
  return fb.mode == Mode::target_verify ? verify_parts(fb, kind) : draft_parts(fb, kind);
}

}  // namespace kvfuzz::fa
