// FlashInferPlan::check_metadata: the plan's CSRs against the cache and the mode's extent.
//
// Where it sits: called by the property harness after planning (properties/check.cc). For every
// paged call it checks, row by row: kv_indptr is the prefix sum of the pages the row's extent
// needs; kv_last_page_len lies in [1, page_size] and (pages - 1) * ps + last_page_len equals the
// extent (paged_kv_t::get_length); every key maps back to its req_to_token slot (SWA layers:
// translated), draft-branch keys to the columns of the drafting layout, padded rows to page 0 (or,
// empty_padded_rows, to no page at all: vLLM's padding);
// qo_indptr and mask_indptr are prefix sums of q_len and q_len * kv_len; the verify mask of full
// layers is the batch's tree mask. The extents are stated here from SEMANTICS §3, apart from the
// planner: a query at position P sees keys from P - W (window) or floor(P / C) * C (chunk).
#include <algorithm>
#include <string>

#include "backends/common/paged_view.h"
#include "backends/flashinfer/flashinfer_plan.h"
#include "reference/draft_layout.h"

namespace kvfuzz::flashinfer {
namespace {

// First key position a query at `p` sees.
int64_t first_key(const Layer& l, int64_t p) {
  if (l.kind == LayerKind::sliding_window) return std::max<int64_t>(0, p - l.window);
  if (l.kind == LayerKind::chunked) return std::max<int64_t>(0, p) / l.chunk * l.chunk;
  return 0;
}

struct Extent {
  int64_t lo = 0, hi = 0;  // source keys [lo, hi) the row must cover
  int64_t q_len = 0;
};

// What the mode requires of kernel row r (batch row i = r / rows_per_batch_row).
Extent extent_of(const WrapperPlan& w, const Layer& l, const ForwardBatch& fb, int32_t i) {
  const auto at = [i](const std::vector<int32_t>& v) { return static_cast<int64_t>(v[static_cast<size_t>(i)]); };
  const int64_t seq = at(fb.seq_lens), ext = at(fb.extend_lens);
  switch (w.role) {
    case Role::decode: return {first_key(l, seq - 1), seq, 1};
    case Role::draft: {
      const int64_t end = seq + fb.draft_step + 1;
      return {first_key(l, end - 1), end, 1};
    }
    case Role::verify: return {first_key(l, seq), seq + fb.draft_tokens, fb.draft_tokens};
    case Role::prefix: return {first_key(l, at(fb.prefix_lens)), at(fb.prefix_lens), ext};
    case Role::full_extend: return {first_key(l, std::max<int64_t>(0, seq - ext)), seq, ext};
    case Role::ragged: return {0, ext, ext};
  }
  return {};
}

class CallChecker {
 public:
  CallChecker(const LayerGroupPlan& g, int32_t layer, const WrapperPlan& w, MetadataChecker& check)
      : g_(g), layer_(layer), w_(w), check_(check), fb_(check.batch()), ps_(w.page_size) {}

  void run() {
    const int32_t rows = fb_.padded_bs * w_.rows_per_batch_row;
    check_.equal(w_.qo_indptr.name() + " rows", w_.rows, rows);
    if (w_.rows != rows) return;
    std::vector<int64_t> q_lens, entries, mask_lens;
    std::vector<Extent> extents;
    for (int32_t r = 0; r < rows; ++r) {
      Extent e = extent_of(w_, g_.layer, fb_, r / w_.rows_per_batch_row);
      // vLLM's padding: a padded row reads no key and holds its padded tokens (a FULL graph) or none (eager)
      if (w_.empty_padded_rows && r / w_.rows_per_batch_row >= fb_.bs) {
        const int64_t planned = w_.qo_indptr[r + 1] - w_.qo_indptr[r];
        e = {0, 0, planned == 0 ? 0 : e.q_len};
      }
      const int64_t first = e.lo / ps_ * ps_;
      const int64_t kv_len = e.lo < e.hi ? e.hi - first : 0;
      q_lens.push_back(e.q_len);
      entries.push_back(w_.paged() ? (kv_len + ps_ - 1) / ps_ : kv_len);
      mask_lens.push_back(e.q_len * kv_len);
      extents.push_back(e);
    }
    check_.prefix_sums(w_.qo_indptr, q_lens);
    check_.prefix_sums(w_.kv_indptr, entries);
    if (w_.has_mask) check_.prefix_sums(w_.mask_indptr, mask_lens);
    if (!w_.paged()) return;
    for (int32_t r = 0; r < rows; ++r) {
      const int64_t pages = w_.kv_indptr[r + 1] - w_.kv_indptr[r];
      if (pages != entries[static_cast<size_t>(r)] || pages == 0) continue;  // reported by prefix_sums
      check_row(r, extents[static_cast<size_t>(r)], pages);
    }
    if (w_.role == Role::verify && g_.layer.kind == LayerKind::full) check_tree_mask(mask_lens);
  }

 private:
  std::string entry(const std::string& buffer, int64_t index) const { return buffer + "[" + std::to_string(index) + "]"; }

  void check_row(int32_t r, const Extent& e, int64_t pages) {
    const int32_t i = r / w_.rows_per_batch_row;
    const int64_t first = e.lo / ps_ * ps_;
    const int64_t last = w_.kv_last_page_len[r];
    if (last < 1 || last > ps_) {
      check_.fail(entry(w_.kv_last_page_len.name(), r) + " is " + std::to_string(last) + ", outside [1, " +
                  std::to_string(ps_) + "] (FlashInfer #320: never checked by the kernel)");
    }
    check_.equal("keys of " + w_.kv_indptr.name() + " row " + std::to_string(r) + " ((pages - 1) * " +
                     std::to_string(ps_) + " + kv_last_page_len)",
                 paged_csr_length(pages, last, ps_), e.hi - first);
    const int64_t row_offset = w_.kv_indptr[r];
    if (i >= fb_.bs) {  // padded rows read the dummy page only
      for (int64_t p = 0; p < pages; ++p) {
        if (w_.kv_indices[row_offset + p] != 0)
          check_.fail(entry(w_.kv_indices.name(), row_offset + p) + " of padded row " + std::to_string(r) + " is page " +
                      std::to_string(w_.kv_indices[row_offset + p]) + ", not the dummy page 0");
      }
      return;
    }
    if (w_.role != Role::draft) {
      check_.page_table_row(w_.kv_indices, row_offset, ps_, layer_, i, static_cast<int32_t>(first),
                            static_cast<int32_t>(e.hi - first));
      return;
    }
    // Draft rows: the prefix, then the branch's steps (reference/draft_layout.h); a page-granular
    // row reads the partial last page from the branch's copy.
    const int32_t t = r % w_.rows_per_batch_row;
    const DraftLayout l = draft_layout(fb_.seq_lens[static_cast<size_t>(i)], fb_.page_size, fb_.topk, fb_.draft_steps);
    for (auto k = static_cast<int32_t>(first); k < e.hi; ++k)
      check_.page_table_key(w_.kv_indices, row_offset, ps_, k - static_cast<int32_t>(first), layer_, i,
                            l.key_logical_column(t, k), l.key_column(t, k, ps_));
  }

  // Full layers: the verify mask is the batch's tree mask, prefix columns included.
  void check_tree_mask(const std::vector<int64_t>& mask_lens) {
    const int64_t D = fb_.draft_tokens;
    int64_t tree_offset = 0;
    for (int32_t i = 0; i < fb_.padded_bs; ++i) {
      const int64_t width = fb_.seq_lens[static_cast<size_t>(i)] + D;
      if (mask_lens[static_cast<size_t>(i)] == D * width) {
        const int64_t base = w_.mask_indptr[i];
        for (int64_t x = 0; x < D * width; ++x) {
          const bool got = w_.custom_mask[base + x] != 0, want = fb_.custom_mask[static_cast<size_t>(tree_offset + x)] != 0;
          if (got != want) {
            check_.fail(entry(w_.custom_mask.name(), base + x) + " (row " + std::to_string(i) + ", draft " +
                        std::to_string(x / width) + ", column " + std::to_string(x % width) + ") is " +
                        std::to_string(got) + ", the tree mask says " + std::to_string(want));
            break;
          }
        }
      }
      tree_offset += D * width;
    }
  }

  const LayerGroupPlan& g_;
  int32_t layer_;
  const WrapperPlan& w_;
  MetadataChecker& check_;
  const ForwardBatch& fb_;
  int32_t ps_;
};

}  // namespace

void FlashInferPlan::check_metadata(MetadataChecker& check) const {
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const auto first_layer = std::find(group_of_layer.begin(), group_of_layer.end(), static_cast<int32_t>(gi));
    if (first_layer == group_of_layer.end()) continue;
    const auto layer = static_cast<int32_t>(first_layer - group_of_layer.begin());
    for (const WrapperPlan& w : groups[gi].calls) CallChecker(groups[gi], layer, w, check).run();
  }
  std::vector<CallShape> calls;  // descales: every layer's own, over its group's calls
  for (int32_t l = 0; l < static_cast<int32_t>(group_of_layer.size()) && !descales.empty(); ++l) {
    calls.clear();
    for (size_t j = 0; j < groups[static_cast<size_t>(group_of_layer[static_cast<size_t>(l)])].calls.size(); ++j)
      calls.push_back({"flashinfer." + std::to_string(j),
                       groups[static_cast<size_t>(group_of_layer[static_cast<size_t>(l)])].calls[j].rows});
    check_descales(check, descales, l, calls);
  }
}

void FlashInferPlan::check_guards() const {
  for (const LayerGroupPlan& g : groups) {
    for (const WrapperPlan& w : g.calls) {
      w.qo_indptr.check_guards();
      w.kv_indptr.check_guards();
      w.kv_indices.check_guards();
      w.kv_last_page_len.check_guards();
      w.custom_mask.check_guards();
      w.mask_indptr.check_guards();
    }
  }
}

}  // namespace kvfuzz::flashinfer
