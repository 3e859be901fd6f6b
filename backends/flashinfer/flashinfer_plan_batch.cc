// The paged_csr family's batching (families.h BatchCase): independent cases of one shape as one
// call per FlashInfer wrapper call. Each call's kernel rows are the cases' rows in order:
// qo_indptr moves to the case's tokens; a paged call's kv_indptr is rebuilt from the rows' page
// counts, its kv_indices (page ids at the call's page size) move by the case's pool offset in
// those pages, kv_last_page_len is kept; a ragged call's kv_indptr (batch tokens: the new K/V)
// moves to the case's tokens; a custom mask's mask_indptr goes past the earlier cases' masks.
// Every row reads, in the batch's pool, exactly the keys it read alone.
//
// Batched only where that is exact: every call's rows hold every token of the case, in order
// (qo_indptr from 0 to num_tokens), every indptr starts at 0, a ragged call reads only the case's
// own tokens, and each group's layers read one pool.
#include "backends/contract/batch_merge.h"
#include "backends/flashinfer/flashinfer_plan.h"

namespace kvfuzz::flashinfer {
namespace {

// The pool the layers of group g read: "full", "swa", "none" or "mixed".
std::string group_pool(const FlashInferPlan& p, const Scenario& s, int32_t g) {
  return batch::pool_of_layers(s, [&](int32_t l) { return p.group_of_layer[static_cast<size_t>(l)] == g; });
}

// Whether the call's arrays have the layout the merge moves (above); "" when they have not.
std::string call_shape(const WrapperPlan& w, int64_t num_tokens) {
  const int64_t rows = w.rows;
  if (!batch::from_zero(w.qo_indptr, rows) || w.qo_indptr[rows] != num_tokens || !batch::from_zero(w.kv_indptr, rows))
    return "";
  if (!w.paged() && w.kv_indptr[rows] > num_tokens) return "";
  if (w.paged() && (w.kv_last_page_len.capacity() < rows || w.kv_indices.capacity() < w.kv_indptr[rows])) return "";
  if (w.has_mask && !batch::from_zero(w.mask_indptr, rows)) return "";
  return " [" + to_string(w.role) + " ps " + std::to_string(w.page_size) + " q/row " +
         std::to_string(w.rows_per_batch_row) + (w.causal ? " causal" : "") + " window " +
         std::to_string(w.window_left) + (w.has_mask ? " mask" : "") + (w.empty_padded_rows ? " empty-padded" : "") +
         "]";
}

WrapperPlan merge_call(const std::vector<const WrapperPlan*>& calls, const std::vector<BatchCase>& cases,
                       PoolKind pool) {
  const WrapperPlan& first = *calls.front();
  WrapperPlan m = first;  // the flags, and the arrays the call does not use (empty), as they are
  std::vector<int64_t> rows;
  m.rows = 0;
  for (const WrapperPlan* c : calls) {
    rows.push_back(c->rows);
    m.rows += c->rows;
  }
  const std::vector<int64_t> tokens = batch::token_offsets(cases), zeros(cases.size(), 0);
  const auto kv = batch::each(calls, batch::field(&WrapperPlan::kv_indptr));
  m.qo_indptr = batch::moved_offsets(first.qo_indptr.name(), batch::each(calls, batch::field(&WrapperPlan::qo_indptr)),
                                     rows, tokens);
  if (first.paged()) {
    m.kv_indptr = batch::indptr(first.kv_indptr.name(), kv, rows);
    m.kv_indices = batch::concat(first.kv_indices.name(), batch::each(calls, batch::field(&WrapperPlan::kv_indices)),
                                 batch::ends(kv, rows), batch::page_offsets(cases, pool, first.page_size));
    m.kv_last_page_len = batch::concat(first.kv_last_page_len.name(),
                                       batch::each(calls, batch::field(&WrapperPlan::kv_last_page_len)), rows, zeros);
  } else {
    m.kv_indptr = batch::moved_offsets(first.kv_indptr.name(), kv, rows, tokens);
  }
  if (first.has_mask) {
    const auto masks = batch::each(calls, batch::field(&WrapperPlan::mask_indptr));
    m.mask_indptr = batch::indptr(first.mask_indptr.name(), masks, rows);
    m.custom_mask = batch::concat(first.custom_mask.name(), batch::each(calls, batch::field(&WrapperPlan::custom_mask)),
                                  batch::ends(masks, rows), zeros);
  }
  return m;
}

}  // namespace

std::string batch_shape(const BatchCase& c) {
  const auto& p = dynamic_cast<const FlashInferPlan&>(*c.plan);
  if (!p.descales.empty()) return "";  // fp8 descales are per call row: not merged
  std::string shape =
      "ps " + std::to_string(p.page_size) + (p.merge == MergeKernel::natural_exp ? " natural" : "") + " layers";
  for (int32_t g : p.group_of_layer) shape += " " + std::to_string(g);
  for (size_t g = 0; g < p.groups.size(); ++g) {
    const std::string pool = group_pool(p, *c.scenario, static_cast<int32_t>(g));
    if (pool == "mixed") return "";
    shape += " | " + batch::layer_shape(p.groups[g].layer) + " " + pool;
    for (const WrapperPlan& w : p.groups[g].calls) {
      const std::string call = call_shape(w, c.num_tokens);
      if (call.empty()) return "";
      shape += call;
    }
  }
  return shape;
}

std::unique_ptr<Plan> merge_plans(const std::vector<BatchCase>& cases) {
  const auto plans = batch::plans_of<FlashInferPlan>(cases);
  const FlashInferPlan& first = *plans.front();
  auto m = std::make_unique<FlashInferPlan>();
  m->page_size = first.page_size;
  m->merge = first.merge;
  m->group_of_layer = first.group_of_layer;
  for (size_t g = 0; g < first.groups.size(); ++g) {
    LayerGroupPlan group;
    group.layer = first.groups[g].layer;
    const bool swa = group_pool(first, *cases.front().scenario, static_cast<int32_t>(g)) == "swa";
    for (size_t j = 0; j < first.groups[g].calls.size(); ++j) {
      std::vector<const WrapperPlan*> calls;
      for (const FlashInferPlan* p : plans) calls.push_back(&p->groups[g].calls[j]);
      group.calls.push_back(merge_call(calls, cases, swa ? PoolKind::swa : PoolKind::full));
    }
    m->groups.push_back(std::move(group));
  }
  return m;
}

}  // namespace kvfuzz::flashinfer
