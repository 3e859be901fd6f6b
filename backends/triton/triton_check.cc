// TritonPlan's own invariants, through the shared MetadataChecker.
//
// Where it sits: planner -> TritonPlan -> **check_metadata** (property harness). The extents are
// derived here again from the forward batch and the layer rule (not from the planner's row
// code), so a planner that lists the wrong number of keys is caught even when every listed key
// is a correct slot:
//   decode / idle      query at P = seq_len - 1: keys [lowest(P), seq_len)
//   draft decode       query at P = seq_len + j: prefix [min(lowest(P), seq_len), seq_len) and the
//                      branch's steps [max(0, lowest(P) - seq_len), j]
//   extend kernels     prefix p (verify: seq_lens; otherwise ForwardBatch::prefix_lens), first
//                      new token at p: keys [lowest(p), p)
// with lowest = 0 (full), P - W (window) or floor(P / C) * C (chunk). Every listed key must be
// the req_to_token slot of its column (SWA: translated); padded rows the dummy slot of row 0.
#include <algorithm>

#include "backends/triton/triton_plan.h"
#include "reference/draft_layout.h"

namespace kvfuzz {
namespace {

struct Expected {
  int32_t request_row = 0, branch = 0;
  int32_t first = 0, prefix_end = 0;     // prefix columns
  int32_t step_begin = 0, step_end = 0;  // draft decode steps
  int32_t len() const { return prefix_end - first + step_end - step_begin; }
};

int32_t lowest(const KvCsr& csr, int32_t position) {
  if (csr.kind == LayerKind::sliding_window) return std::max(0, position - csr.window_or_chunk);
  if (csr.kind == LayerKind::chunked) return position - position % csr.window_or_chunk;
  return 0;
}

Expected expected_row(const ForwardBatch& fb, const TritonPlan& p, const KvCsr& csr, int32_t r) {
  Expected e;
  e.request_row = r / p.queries_per_request;
  const auto i = static_cast<size_t>(e.request_row);
  const int32_t seq_len = fb.seq_lens[i];
  if (fb.mode == Mode::draft_decode) {
    const int32_t lo = lowest(csr, seq_len + fb.draft_step);
    e.branch = r % p.queries_per_request;
    e.first = std::min(lo, seq_len);
    e.prefix_end = seq_len;
    e.step_begin = std::max(0, lo - seq_len);
    e.step_end = fb.draft_step + 1;
  } else if (p.kernel == TritonKernel::decode) {
    e.first = lowest(csr, seq_len - 1);
    e.prefix_end = seq_len;
  } else {
    const int32_t prefix = fb.mode == Mode::target_verify ? seq_len : fb.prefix_lens[i];
    e.first = std::min(prefix, lowest(csr, prefix));
    e.prefix_end = prefix;
  }
  return e;
}

// `layer`: a layer that reads the CSR (all that do share its rule), -1 when none does.
void check_csr(MetadataChecker& check, const TritonPlan& p, const KvCsr& csr, int32_t layer) {
  const ForwardBatch& fb = check.batch();
  const PoolKind pool = csr.pool;
  if (csr.kv_indptr.capacity() != p.rows + 1 || csr.kv_offsets.capacity() != p.rows) {
    check.fail(csr.kv_indptr.name() + " holds " + std::to_string(csr.kv_indptr.capacity()) + " entries for " +
               std::to_string(p.rows) + " kernel rows");
    return;
  }
  std::vector<Expected> rows;
  std::vector<int64_t> lens;
  for (int32_t r = 0; r < p.rows; ++r) {
    rows.push_back(expected_row(fb, p, csr, r));
    lens.push_back(rows.back().len());
  }
  check.prefix_sums(csr.kv_indptr, lens);
  if (csr.kv_indptr[p.rows] > csr.kv_indices.capacity())
    check.fail(csr.kv_indptr.name() + "[" + std::to_string(p.rows) + "] = " + std::to_string(csr.kv_indptr[p.rows]) +
               " exceeds the capacity " + std::to_string(csr.kv_indices.capacity()) + " of " + csr.kv_indices.name());
  for (int32_t r = 0; r < p.rows; ++r) {
    const Expected& e = rows[static_cast<size_t>(r)];
    // Only the extend kernel reads window offsets (sglang passes none to the decode kernel).
    if (p.kernel == TritonKernel::extend)
      check.equal(csr.kv_offsets.name() + "[" + std::to_string(r) + "]", csr.kv_offsets[r], e.first);
    const int64_t start = csr.kv_indptr[r];
    const int64_t count = std::min<int64_t>(e.len(), csr.kv_indptr[r + 1] - start);
    const bool real = e.request_row < fb.bs;
    const DraftLayout l =
        draft_layout(fb.seq_lens[static_cast<size_t>(e.request_row)], fb.page_size, fb.topk, fb.draft_steps);
    for (int64_t n = 0; n < count; ++n) {
      const int64_t index = start + n;
      if (index < 0 || index >= csr.kv_indices.capacity()) break;
      const bool draft = n >= e.prefix_end - e.first;
      const int32_t step = e.step_begin + static_cast<int32_t>(n) - (e.prefix_end - e.first);
      const int32_t column = draft ? l.column(e.branch, step) : e.first + static_cast<int32_t>(n);  // req_to_token
      if (!real) {  // padded rows read the dummy slot (row 0 of req_to_token, or out_cache_loc 0)
        check.equal(csr.kv_indices.name() + "[" + std::to_string(index) + "] (padded row " + std::to_string(r) + ")",
                    csr.kv_indices[index], draft ? 0 : check.expected_slot(e.request_row, column, pool));
      } else if (layer >= 0) {
        const int32_t logical = draft ? l.logical_column(e.branch, step) : column;
        check.token_entry(csr.kv_indices, index, layer, e.request_row, logical, column);
      }
    }
  }
}

// Any split count in [1, max_kv_splits] gives the same keys (the adaptive count is a tuning
// choice, not an invariant); more would index attn_logits past its split dimension. Static mode
// gives every row max_kv_splits.
void check_kv_splits(MetadataChecker& check, const TritonPlan& p, const KvCsr& csr) {
  const ForwardBatch& fb = check.batch();
  if (csr.num_kv_splits.capacity() < p.rows) {
    check.fail(csr.num_kv_splits.name() + " holds " + std::to_string(csr.num_kv_splits.capacity()) + " entries for " +
               std::to_string(p.rows) + " kernel rows");
    return;
  }
  for (int32_t r = 0; r < p.rows; ++r) {
    const std::string what = csr.num_kv_splits.name() + "[" + std::to_string(r) + "]";
    const int32_t splits = csr.num_kv_splits[r];
    if (fb.device_sms == 0) check.equal(what + " (static splits)", splits, p.max_kv_splits);
    else if (splits < 1 || splits > p.max_kv_splits)
      check.fail(what + " = " + std::to_string(splits) + " is outside [1, " + std::to_string(p.max_kv_splits) +
                 "], the split dimension of attn_logits");
  }
}

void check_verify_mask(MetadataChecker& check, const TritonPlan& p) {
  const ForwardBatch& fb = check.batch();
  std::vector<int64_t> lens;
  for (int32_t i = 0; i < fb.padded_bs; ++i)
    lens.push_back(int64_t{fb.draft_tokens} * (fb.seq_lens[static_cast<size_t>(i)] + fb.draft_tokens));
  check.prefix_sums(p.mask_indptr, lens);
  const auto n = static_cast<int64_t>(fb.custom_mask.size());
  if (p.custom_mask.capacity() < n) {
    check.fail("custom_mask holds " + std::to_string(p.custom_mask.capacity()) + " entries, the tree mask needs " +
               std::to_string(n));
    return;
  }
  for (int64_t e = 0; e < n; ++e) {
    if (p.custom_mask[e] != fb.custom_mask[static_cast<size_t>(e)]) {
      check.fail("custom_mask[" + std::to_string(e) + "] is " + std::to_string(p.custom_mask[e]) +
                 ", the tree mask says " + std::to_string(fb.custom_mask[static_cast<size_t>(e)]));
      return;
    }
  }
}

}  // namespace

void TritonPlan::check_metadata(MetadataChecker& check) const {
  const ForwardBatch& fb = check.batch();
  const int32_t want_rows = fb.mode == Mode::draft_decode ? fb.padded_bs * fb.topk : fb.padded_bs;
  check.equal("kernel rows", rows, want_rows);
  if (rows != want_rows) return;
  for (size_t c = 0; c < csrs.size(); ++c) {
    const auto reader = std::find(layer_csr.begin(), layer_csr.end(), static_cast<int32_t>(c));
    check_csr(check, *this, csrs[c], reader == layer_csr.end() ? -1 : static_cast<int32_t>(reader - layer_csr.begin()));
  }
  check.equal("positions entries", positions.capacity(), fb.num_tokens());
  for (int64_t t = 0; t < std::min(positions.capacity(), fb.num_tokens()); ++t)
    check.equal("positions[" + std::to_string(t) + "]", positions[t], fb.positions[static_cast<size_t>(t)]);
  if (kernel == TritonKernel::decode) {
    check.equal("max_kv_splits", max_kv_splits, std::max(1, fb.kv_splits));
    for (const KvCsr& csr : csrs) check_kv_splits(check, *this, csr);
  }
  if (kernel == TritonKernel::extend) {
    std::vector<int64_t> lens(fb.extend_lens.begin(), fb.extend_lens.end());
    check.prefix_sums(qo_indptr, lens);
  }
  if (use_custom_mask && kernel == TritonKernel::extend) check_verify_mask(check, *this);
}

void TritonPlan::check_guards() const {
  for (const KvCsr& csr : csrs) {
    csr.kv_indptr.check_guards();
    csr.kv_indices.check_guards();
    csr.kv_offsets.check_guards();
    csr.num_kv_splits.check_guards();
  }
  qo_indptr.check_guards();
  positions.check_guards();
  mask_indptr.check_guards();
  custom_mask.check_guards();
}

}  // namespace kvfuzz
