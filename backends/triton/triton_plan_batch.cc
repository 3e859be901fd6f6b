// The token_csr family's batching (families.h BatchCase): independent cases of one shape as one
// call of sglang's Triton decode or extend kernel. Kernel rows are the cases' rows in order; each
// CSR's kv_indptr is rebuilt from the rows' key counts and its kv_indices (token slots) move by
// the case's offset in the CSR's pool; qo_indptr and positions move to the case's tokens, the
// verify mask's offsets past the earlier cases' masks. Every row reads exactly what it read alone.
//
// Batched only where that is exact: decode rows are the case's tokens one for one, extend rows
// hold every token in order (qo_indptr from 0 to num_tokens), every indptr starts at 0.
#include <algorithm>

#include "backends/contract/batch_merge.h"
#include "backends/triton/triton_plan.h"

namespace kvfuzz::triton {
namespace {

using batch::concat;
using batch::indptr;

int64_t kernel_rows(const TritonPlan& p) { return p.kernel == TritonKernel::decode ? p.rows : p.padded_bs; }

}  // namespace

std::string batch_shape(const BatchCase& c) {
  const auto& p = dynamic_cast<const TritonPlan&>(*c.plan);
  if (p.kernel == TritonKernel::none || p.positions.capacity() != c.num_tokens) return "";
  if (p.kernel == TritonKernel::decode && p.rows != c.num_tokens) return "";
  if (p.kernel == TritonKernel::extend &&
      (p.qo_indptr.capacity() != p.padded_bs + 1 || p.qo_indptr[0] != 0 || p.qo_indptr[p.padded_bs] != c.num_tokens))
    return "";
  if (p.use_custom_mask && (p.mask_indptr.capacity() != p.padded_bs + 1 || p.mask_indptr[0] != 0)) return "";
  std::string shape = std::string(p.kernel == TritonKernel::decode ? "decode" : "extend") + (p.graph ? " graph" : "") +
                      " q/row " + std::to_string(p.queries_per_request) + (p.use_custom_mask ? " mask" : "") +
                      batch::sinks_shape(p.sinks) + " layers";
  for (int32_t c_of : p.layer_csr) shape += " " + std::to_string(c_of);
  for (const KvCsr& csr : p.csrs) {
    const int64_t rows = kernel_rows(p);
    if (csr.kv_indptr.capacity() != rows + 1 || csr.kv_indptr[0] != 0 || csr.kv_offsets.capacity() != rows ||
        (csr.num_kv_splits.capacity() != rows && csr.num_kv_splits.capacity() != 0))
      return "";
    shape += " | " + csr.name("csr") + (csr.pool == PoolKind::swa ? " swa" : " full") +
             (csr.num_kv_splits.capacity() ? " splits" : "");
  }
  return shape;
}

std::unique_ptr<Plan> merge_plans(const std::vector<BatchCase>& cases) {
  std::vector<const TritonPlan*> plans;
  for (const BatchCase& c : cases) plans.push_back(&dynamic_cast<const TritonPlan&>(*c.plan));
  const TritonPlan& first = *plans.front();
  auto m = std::make_unique<TritonPlan>();
  m->mode = first.mode;
  m->kernel = first.kernel;
  m->graph = first.graph;
  m->queries_per_request = first.queries_per_request;
  m->use_custom_mask = first.use_custom_mask;
  m->layer_csr = first.layer_csr;
  m->sinks = first.sinks;  // every case's (batch_shape)
  std::vector<int64_t> rows, requests, tokens, token_offsets, zeros(cases.size(), 0);
  for (size_t i = 0; i < cases.size(); ++i) {
    const TritonPlan& p = *plans[i];
    m->bs += p.bs;
    m->padded_bs += p.padded_bs;
    m->rows += p.rows;
    m->max_kv_splits = std::max(m->max_kv_splits, p.max_kv_splits);
    rows.push_back(kernel_rows(p));
    requests.push_back(p.padded_bs);
    tokens.push_back(cases[i].num_tokens);
    token_offsets.push_back(cases[i].token_offset);
  }
  auto field = [&](auto member) {
    std::vector<const std::remove_reference_t<decltype(first.*member)>*> parts;
    for (const TritonPlan* p : plans) parts.push_back(&(p->*member));
    return parts;
  };
  m->positions = concat(first.positions.name(), field(&TritonPlan::positions), tokens, zeros);
  if (first.kernel == TritonKernel::extend) {
    // Case i's queries start at its token offset.
    m->qo_indptr = batch::moved_offsets(first.qo_indptr.name(), field(&TritonPlan::qo_indptr), requests, token_offsets);
  } else {
    m->qo_indptr = Buffer<int32_t>(first.qo_indptr.name(), 0);
  }
  if (first.use_custom_mask) {
    const auto masks = field(&TritonPlan::mask_indptr);
    m->mask_indptr = indptr(first.mask_indptr.name(), masks, requests);
    m->custom_mask =
        concat(first.custom_mask.name(), field(&TritonPlan::custom_mask), batch::ends(masks, requests), zeros);
  } else {
    m->mask_indptr = Buffer<int64_t>(first.mask_indptr.name(), 0);
    m->custom_mask = Buffer<uint8_t>(first.custom_mask.name(), 0);
  }
  for (size_t j = 0; j < first.csrs.size(); ++j) {
    const KvCsr& c0 = first.csrs[j];
    KvCsr csr;
    csr.kind = c0.kind;
    csr.window_or_chunk = c0.window_or_chunk;
    csr.pool = c0.pool;
    std::vector<const Buffer<int32_t>*> ptr, offsets, splits;
    std::vector<const Buffer<int64_t>*> indices;
    std::vector<int64_t> keys, split_counts;
    for (size_t i = 0; i < plans.size(); ++i) {
      const KvCsr& c = plans[i]->csrs[j];
      ptr.push_back(&c.kv_indptr);
      offsets.push_back(&c.kv_offsets);
      splits.push_back(&c.num_kv_splits);
      indices.push_back(&c.kv_indices);
      keys.push_back(c.kv_indptr[rows[i]]);
      split_counts.push_back(c.num_kv_splits.capacity());
    }
    csr.kv_indptr = indptr(c0.kv_indptr.name(), ptr, rows);
    csr.kv_indices = concat(c0.kv_indices.name(), indices, keys, batch::slot_offsets(cases, c0.pool));
    csr.kv_offsets = concat(c0.kv_offsets.name(), offsets, rows, zeros);
    csr.num_kv_splits = concat(c0.num_kv_splits.name(), splits, split_counts, zeros);
    m->csrs.push_back(std::move(csr));
  }
  return m;
}

}  // namespace kvfuzz::triton
