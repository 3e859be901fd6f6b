// The token_csr family's batching (families.h BatchCase): independent cases of one shape as one
// call of sglang's Triton decode or extend kernel. Kernel rows are the cases' rows in order; each
// CSR's kv_indptr is rebuilt from the rows' key counts and its kv_indices (token slots) move by
// the case's offset in the CSR's pool; qo_indptr and positions move to the case's tokens, the
// verify mask's offsets past the earlier cases' masks. Every row reads exactly what it read alone.
//
// Batched only where that is exact: decode rows are the case's tokens one for one, extend rows
// hold every token in order (qo_indptr from 0 to num_tokens), every indptr starts at 0.
#include <algorithm>

#include "backends/contract/families.h"
#include "backends/triton/triton_plan.h"

namespace kvfuzz::triton {
namespace {

// The first counts[i] entries of each case's buffer, entry e of case i written as e + add[i].
template <class T>
Buffer<T> concat(const std::string& name, const std::vector<const Buffer<T>*>& parts,
                 const std::vector<int64_t>& counts, const std::vector<int64_t>& add) {
  int64_t total = 0;
  for (int64_t n : counts) total += n;
  Buffer<T> m(name, total);
  int64_t at = 0;
  for (size_t i = 0; i < parts.size(); ++i)
    for (int64_t e = 0; e < counts[i]; ++e) m.set(at++, static_cast<T>((*parts[i])[e] + add[i]));
  return m;
}

// Offsets [rows_i + 1] of each case (each from 0) as one offset array over all rows.
template <class T>
Buffer<T> indptr(const std::string& name, const std::vector<const Buffer<T>*>& parts,
                 const std::vector<int64_t>& rows) {
  int64_t total = 0;
  for (int64_t n : rows) total += n;
  Buffer<T> m(name, total + 1);
  int64_t at = 0;
  T base = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    for (int64_t r = 1; r <= rows[i]; ++r) m.set(++at, base + (*parts[i])[r]);
    base = m[at];
  }
  return m;
}

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
                      " layers";
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
    // Case i's queries start at its token offset: qo_indptr[r] + offset for r >= 1.
    m->qo_indptr = Buffer<int32_t>(first.qo_indptr.name(), m->padded_bs + 1);
    int64_t at = 0;
    for (size_t i = 0; i < plans.size(); ++i)
      for (int32_t r = 1; r <= plans[i]->padded_bs; ++r)
        m->qo_indptr.set(++at, static_cast<int32_t>(token_offsets[i] + plans[i]->qo_indptr[r]));
  } else {
    m->qo_indptr = Buffer<int32_t>(first.qo_indptr.name(), 0);
  }
  if (first.use_custom_mask) {
    const auto masks = field(&TritonPlan::mask_indptr);
    m->mask_indptr = indptr(first.mask_indptr.name(), masks, requests);
    std::vector<int64_t> entries;
    for (size_t i = 0; i < plans.size(); ++i) entries.push_back((*masks[i])[requests[i]]);
    m->custom_mask = concat(first.custom_mask.name(), field(&TritonPlan::custom_mask), entries, zeros);
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
    std::vector<int64_t> keys, slots, split_counts;
    for (size_t i = 0; i < plans.size(); ++i) {
      const KvCsr& c = plans[i]->csrs[j];
      ptr.push_back(&c.kv_indptr);
      offsets.push_back(&c.kv_offsets);
      splits.push_back(&c.num_kv_splits);
      indices.push_back(&c.kv_indices);
      keys.push_back(c.kv_indptr[rows[i]]);
      slots.push_back(c.pool == PoolKind::swa ? cases[i].swa_slot_offset : cases[i].full_slot_offset);
      split_counts.push_back(c.num_kv_splits.capacity());
    }
    csr.kv_indptr = indptr(c0.kv_indptr.name(), ptr, rows);
    csr.kv_indices = concat(c0.kv_indices.name(), indices, keys, slots);
    csr.kv_offsets = concat(c0.kv_offsets.name(), offsets, rows, zeros);
    csr.num_kv_splits = concat(c0.num_kv_splits.name(), splits, split_counts, zeros);
    m->csrs.push_back(std::move(csr));
  }
  return m;
}

}  // namespace kvfuzz::triton
