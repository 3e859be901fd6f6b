// The mla family's batching (families.h BatchCase): independent cases of one shape as one call.
//   - latent decode (FlashMLA): kernel rows are the cases' rows in order, for every step's table;
//     a row's block-table row moves by its case's pool offset in pages (full and SWA tables
//     apart), cache_seqlens are kept, cu_seqlens_q moves to the case's tokens, the tree mask's
//     mask_indptr past the earlier cases' masks;
//   - prefill: qo_indptr moves to the case's tokens, kv_lens are kept, the gather CSR (kv_indptr)
//     is rebuilt and its kv_indices / swa_kv_indices (pool slots) move by the case's pool offsets;
//     the linear layout's indptr is rebuilt and its entries move past the earlier cases' gathered
//     tokens.
// positions are the cases' positions end to end. Every row reads, in the batch's pool, exactly
// the keys it read alone.
//
// Batched only where that is exact: the rows hold every token of the case, in order (from 0 to
// num_tokens), every indptr starts at 0, and the prefill layout's block_size is 1 (a block of the
// linear buffer would straddle two cases).
#include <algorithm>

#include "backends/contract/batch_merge.h"
#include "backends/mla/mla_plan.h"

namespace kvfuzz::mla {
namespace {

std::string decode_shape(const LatentDecodeMeta& m, bool hybrid, int64_t num_tokens) {
  const int64_t rows = m.rows, seqlens = int64_t{m.steps} * m.row_capacity;
  if (rows > m.row_capacity || m.step < 0 || m.step >= m.steps || !batch::from_zero(m.cu_seqlens_q, rows) ||
      m.cu_seqlens_q[rows] != num_tokens || m.cache_seqlens.capacity() < seqlens ||
      m.block_table.capacity() < seqlens * m.width || (hybrid && m.swa_block_table.capacity() < seqlens * m.width) ||
      (m.tree_mask && !batch::from_zero(m.mask_indptr, rows)))
    return "";
  return "decode q/request " + std::to_string(m.rows_per_request) + " step " + std::to_string(m.step) + "/" +
         std::to_string(m.steps) + " splits " + std::to_string(m.num_splits) + (m.tree_mask ? " tree" : "") +
         (m.empty_padded_rows ? " empty-padded" : "");
}

std::string prefill_shape(const PrefillMeta& m, bool hybrid, int64_t num_tokens) {
  const int64_t rows = m.kv_lens.capacity();
  if (m.block_size != 1 || !batch::from_zero(m.qo_indptr, rows) || m.qo_indptr[rows] != num_tokens ||
      !batch::from_zero(m.kv_indptr, rows) || !batch::from_zero(m.linear_kv_indptr, rows) ||
      m.kv_indices.capacity() < m.kv_indptr[rows] || (hybrid && m.swa_kv_indices.capacity() < m.kv_indptr[rows]) ||
      m.linear_kv_indices.capacity() < m.linear_kv_indptr[rows])
    return "";
  return std::string("prefill") + (m.empty_padded_rows ? " empty-padded" : "");
}

// One table [steps][row_capacity][width] (block_table or swa_block_table) of every case as the
// batch's, rows end to end, page ids moved by `pages`.
Buffer<int32_t> merge_tables(const std::vector<const LatentDecodeMeta*>& metas, const LatentDecodeMeta& m,
                             Buffer<int32_t> LatentDecodeMeta::*table, const std::vector<int64_t>& pages) {
  Buffer<int32_t> out((metas.front()->*table).name(), int64_t{m.steps} * m.row_capacity * m.width);
  for (int32_t s = 0; s < m.steps; ++s) {
    int64_t row = int64_t{s} * m.row_capacity;
    for (size_t i = 0; i < metas.size(); ++i) {
      const LatentDecodeMeta& c = *metas[i];
      for (int32_t r = 0; r < c.rows; ++r, ++row)
        batch::copy_table_row(out, row * m.width, m.width, c.*table, (int64_t{s} * c.row_capacity + r) * c.width,
                              c.width, pages[i]);
    }
  }
  return out;
}

LatentDecodeMeta merge_decode(const std::vector<const LatentDecodeMeta*>& metas, const std::vector<BatchCase>& cases,
                              bool hybrid, int32_t page_size) {
  using M = LatentDecodeMeta;
  const M& first = *metas.front();
  M m = first;  // steps, step, splits, flags, and the arrays the call does not use (empty)
  std::vector<int64_t> rows;
  m.rows = 0;
  for (const M* c : metas) {
    rows.push_back(c->rows);
    m.rows += c->rows;
    m.width = std::max(m.width, c->width);
    m.max_seqlen_q = std::max(m.max_seqlen_q, c->max_seqlen_q);
    m.max_seqlen_k = std::max(m.max_seqlen_k, c->max_seqlen_k);
  }
  m.row_capacity = m.rows;
  m.block_table = merge_tables(metas, m, &M::block_table, batch::page_offsets(cases, PoolKind::full, page_size));
  if (hybrid)
    m.swa_block_table =
        merge_tables(metas, m, &M::swa_block_table, batch::page_offsets(cases, PoolKind::swa, page_size));
  m.cache_seqlens = Buffer<int32_t>(first.cache_seqlens.name(), int64_t{m.steps} * m.row_capacity);
  for (int32_t s = 0; s < m.steps; ++s) {
    int64_t row = int64_t{s} * m.row_capacity;
    for (const M* c : metas)
      for (int32_t r = 0; r < c->rows; ++r)
        m.cache_seqlens.set(row++, c->cache_seqlens[int64_t{s} * c->row_capacity + r]);
  }
  m.cu_seqlens_q = batch::moved_offsets(first.cu_seqlens_q.name(), batch::each(metas, batch::field(&M::cu_seqlens_q)),
                                        rows, batch::token_offsets(cases));
  if (first.tree_mask) {
    const auto masks = batch::each(metas, batch::field(&M::mask_indptr));
    m.mask_indptr = batch::indptr(first.mask_indptr.name(), masks, rows);
    m.custom_mask = batch::concat(first.custom_mask.name(), batch::each(metas, batch::field(&M::custom_mask)),
                                  batch::ends(masks, rows), std::vector<int64_t>(cases.size(), 0));
  }
  return m;
}

PrefillMeta merge_prefill(const std::vector<const PrefillMeta*>& metas, const std::vector<BatchCase>& cases,
                          bool hybrid) {
  using M = PrefillMeta;
  const M& first = *metas.front();
  M m = first;  // block_size, flags, and swa_kv_indices when not hybrid (empty)
  std::vector<int64_t> rows;
  for (const M* c : metas) {
    rows.push_back(c->kv_lens.capacity());
    m.max_seqlen_q = std::max(m.max_seqlen_q, c->max_seqlen_q);
    m.max_seqlen_k = std::max(m.max_seqlen_k, c->max_seqlen_k);
  }
  const std::vector<int64_t> zeros(cases.size(), 0);
  const auto kv = batch::each(metas, batch::field(&M::kv_indptr)),
             linear = batch::each(metas, batch::field(&M::linear_kv_indptr));
  const auto gathered = batch::ends(kv, rows);
  m.qo_indptr = batch::moved_offsets(first.qo_indptr.name(), batch::each(metas, batch::field(&M::qo_indptr)), rows,
                                     batch::token_offsets(cases));
  m.kv_lens = batch::concat(first.kv_lens.name(), batch::each(metas, batch::field(&M::kv_lens)), rows, zeros);
  m.kv_indptr = batch::indptr(first.kv_indptr.name(), kv, rows);
  m.kv_indices = batch::concat(first.kv_indices.name(), batch::each(metas, batch::field(&M::kv_indices)), gathered,
                               batch::slot_offsets(cases, PoolKind::full));
  if (hybrid)
    m.swa_kv_indices = batch::concat(first.swa_kv_indices.name(), batch::each(metas, batch::field(&M::swa_kv_indices)),
                                     gathered, batch::slot_offsets(cases, PoolKind::swa));
  // block_size 1: a linear entry is a gathered token, case i's after the earlier cases' ones.
  m.linear_kv_indptr = batch::indptr(first.linear_kv_indptr.name(), linear, rows);
  m.linear_kv_indices =
      batch::concat(first.linear_kv_indices.name(), batch::each(metas, batch::field(&M::linear_kv_indices)),
                    batch::ends(linear, rows), batch::starts(gathered));
  return m;
}

}  // namespace

std::string batch_shape(const BatchCase& c) {
  const auto& p = dynamic_cast<const MlaPlan&>(*c.plan);
  if (p.positions.capacity() != c.num_tokens) return "";
  const std::string path = p.path == MlaPath::prefill ? prefill_shape(p.prefill, p.hybrid, c.num_tokens)
                                                      : decode_shape(p.decode, p.hybrid, c.num_tokens);
  if (path.empty()) return "";
  std::string shape = "ps " + std::to_string(p.page_size) + (p.hybrid ? " hybrid" : "") + " pools";
  for (PoolKind k : p.layer_pools) shape += " " + to_string(k);
  return shape + " | " + path;
}

std::unique_ptr<Plan> merge_plans(const std::vector<BatchCase>& cases) {
  const auto plans = batch::plans_of<MlaPlan>(cases);
  const MlaPlan& first = *plans.front();
  // The path, page size and layer pools of the first case; the path not taken is not read: its
  // metadata as it is.
  auto m = std::make_unique<MlaPlan>(first);
  m->plan_run.clear();
  std::vector<int64_t> tokens;
  for (const BatchCase& c : cases) tokens.push_back(c.num_tokens);
  m->positions = batch::concat(first.positions.name(), batch::each(plans, batch::field(&MlaPlan::positions)), tokens,
                               std::vector<int64_t>(cases.size(), 0));
  if (first.path == MlaPath::prefill)
    m->prefill = merge_prefill(batch::each(plans, batch::field(&MlaPlan::prefill)), cases, first.hybrid);
  else
    m->decode = merge_decode(batch::each(plans, batch::field(&MlaPlan::decode)), cases, first.hybrid, first.page_size);
  return m;
}

}  // namespace kvfuzz::mla
