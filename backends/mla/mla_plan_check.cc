// MlaPlan's own invariants, for the metadata property.
//
// Where it sits: properties -> MlaPlan::check_metadata(checker). It re-derives from the forward
// batch what each table must say and compares through the shared MetadataChecker helpers:
//   - block tables: stride/divide invariance of every real row over the keys it reads
//     (page_table_row); drafting rows key by key over the prefix, then the branch's region
//     (page_table_key, reference/draft_layout.h); padded rows' read pages are the dummy page 0;
//   - cache_seqlens = the mode's written extent; max_seqlen_k = its max; cu_seqlens_q, qo_indptr,
//     kv_indptr, mask_indptr are prefix sums; the tree mask is the batch's;
//   - the prefill gather CSR maps each entry back to req_to_token (token_entry), and key k of row
//     i read through the linear layout descriptor and then the gather is its req_to_token slot
//     (gathered_key: the stride/divide property); the descriptor's block_size is 1.
#include <algorithm>

#include "backends/mla/mla_plan.h"
#include "reference/draft_layout.h"

namespace kvfuzz::mla {
namespace {

std::string at(const std::string& name, int64_t i) { return name + "[" + std::to_string(i) + "]"; }

// The written extent a kernel row of batch row `i` must read (SEMANTICS §2 conventions).
int64_t expected_keys(const ForwardBatch& fb, int32_t i, int32_t step) {
  const int64_t s = fb.seq_lens[static_cast<size_t>(i)];
  if (fb.mode == Mode::target_verify) return s + fb.draft_tokens;
  if (fb.mode == Mode::draft_decode) return s + step + 1;
  return s;
}

void check_block_rows(const MlaPlan& plan, const Buffer<int32_t>& table, int32_t layer, MetadataChecker& check) {
  const ForwardBatch& fb = check.batch();
  const LatentDecodeMeta& m = plan.decode;
  const int32_t ps = plan.page_size;
  for (int32_t i = 0; i < fb.bs; ++i) {
    const int32_t s = fb.seq_lens[static_cast<size_t>(i)];
    const auto keys = static_cast<int32_t>(expected_keys(fb, i, m.step));
    const DraftLayout l = draft_layout(s, fb.page_size, fb.topk, fb.draft_steps);
    for (int32_t t = 0; t < m.rows_per_request; ++t) {
      const int64_t offset = m.table_row(i * m.rows_per_request + t);
      if (fb.mode != Mode::draft_decode) {
        check.page_table_row(table, offset, ps, layer, i, 0, keys);
        continue;
      }
      for (int32_t k = 0; k < keys; ++k)
        check.page_table_key(table, offset, ps, k, layer, i, l.key_logical_column(t, k), l.key_column(t, k, ps));
    }
  }
}

// A padded row reads req_to_token row 0: every page it reads must be the dummy page 0.
void check_padded_pages(const MlaPlan& plan, const Buffer<int32_t>& table, MetadataChecker& check) {
  const ForwardBatch& fb = check.batch();
  const LatentDecodeMeta& m = plan.decode;
  for (int32_t r = fb.bs * m.rows_per_request; r < m.rows; ++r) {
    const int64_t keys = expected_keys(fb, r / m.rows_per_request, m.step);
    for (int64_t p = 0; p * plan.page_size < keys; ++p) {
      const int64_t e = m.table_row(r) + p;
      if (table[e] != 0) {
        check.fail(at(table.name(), e) + " (padded row " + std::to_string(r) + ", page " + std::to_string(p) +
                   ") is page " + std::to_string(table[e]) + "; a padded row may only read the dummy page 0");
        return;
      }
    }
  }
}

void check_latent_decode(const MlaPlan& plan, MetadataChecker& check) {
  const ForwardBatch& fb = check.batch();
  const LatentDecodeMeta& m = plan.decode;
  check.equal("kernel rows", m.rows, int64_t{fb.padded_bs} * m.rows_per_request);
  std::vector<int64_t> q_lens;
  int64_t max_keys = 0;
  for (int32_t r = 0; r < m.rows; ++r) {
    const bool empty = m.empty_padded_rows && r >= fb.bs * m.rows_per_request;  // vLLM: no queries, no keys
    const int64_t keys = empty ? 0 : expected_keys(fb, r / m.rows_per_request, m.step);
    check.equal(at("cache_seqlens", m.seqlen_index(r)), m.cache_seqlens[m.seqlen_index(r)], keys);
    max_keys = std::max(max_keys, keys);
    q_lens.push_back(empty ? 0 : fb.mode == Mode::target_verify ? fb.draft_tokens : 1);
  }
  check.equal("max_seqlen_k", m.max_seqlen_k, max_keys);
  check.prefix_sums(m.cu_seqlens_q, q_lens);
  for (int32_t l = 0; l < static_cast<int32_t>(plan.layer_pools.size()); ++l)
    check_block_rows(
        plan, plan.layer_pools[static_cast<size_t>(l)] == PoolKind::swa ? m.swa_block_table : m.block_table, l, check);
  if (!m.empty_padded_rows) {  // empty padded rows read no page (their zero keys are checked above)
    check_padded_pages(plan, m.block_table, check);
    if (plan.hybrid) check_padded_pages(plan, m.swa_block_table, check);
  }
  if (!m.tree_mask) return;
  std::vector<int64_t> mask_lens;
  for (int32_t r = 0; r < m.rows; ++r) mask_lens.push_back(int64_t{fb.draft_tokens} * expected_keys(fb, r, 0));
  check.prefix_sums(m.mask_indptr, mask_lens);
  for (size_t e = 0; e < fb.custom_mask.size(); ++e) {
    if (m.custom_mask[static_cast<int64_t>(e)] != fb.custom_mask[e]) {
      check.fail(at("custom_mask", static_cast<int64_t>(e)) + " differs from the batch's tree mask");
      return;
    }
  }
}

void check_prefill(const MlaPlan& plan, MetadataChecker& check) {
  const ForwardBatch& fb = check.batch();
  const PrefillMeta& m = plan.prefill;
  std::vector<int64_t> q_lens, k_lens;
  for (int32_t i = 0; i < fb.padded_bs; ++i) {
    const bool empty = m.empty_padded_rows && i >= fb.bs;  // vLLM: no queries, no keys
    q_lens.push_back(empty ? 0 : fb.extend_lens[static_cast<size_t>(i)]);
    k_lens.push_back(empty ? 0 : fb.seq_lens[static_cast<size_t>(i)]);
    check.equal(at("kv_lens", i), m.kv_lens[i], k_lens.back());
  }
  check.prefix_sums(m.qo_indptr, q_lens);
  check.prefix_sums(m.kv_indptr, k_lens);
  check.equal("max_seqlen_q", m.max_seqlen_q, q_lens.empty() ? 0 : *std::max_element(q_lens.begin(), q_lens.end()));
  check.equal("max_seqlen_k", m.max_seqlen_k, k_lens.empty() ? 0 : *std::max_element(k_lens.begin(), k_lens.end()));
  for (int32_t l = 0; l < static_cast<int32_t>(plan.layer_pools.size()); ++l) {
    const Buffer<int32_t>& indices =
        plan.layer_pools[static_cast<size_t>(l)] == PoolKind::swa ? m.swa_kv_indices : m.kv_indices;
    for (int32_t i = 0; i < fb.bs; ++i)
      for (int32_t k = 0; k < k_lens[static_cast<size_t>(i)]; ++k)
        check.token_entry(indices, m.kv_indptr[i] + k, l, i, k);
  }
  for (int32_t i = fb.bs; i < fb.padded_bs; ++i) {
    for (int32_t k = 0; k < k_lens[static_cast<size_t>(i)]; ++k) {
      if (m.kv_indices[m.kv_indptr[i] + k] >= plan.page_size) {
        check.fail(at("kv_indices", m.kv_indptr[i] + k) + " (padded row " + std::to_string(i) +
                   ") gathers a slot outside the dummy page 0");
        break;
      }
    }
  }

  // The descriptor, by the general stride/divide property: key k of row i, read through the
  // descriptor and then the gather, must be its req_to_token slot (in the layer's pool).
  check.prefix_sums(m.linear_kv_indptr, k_lens);
  for (int32_t l = 0; l < static_cast<int32_t>(plan.layer_pools.size()); ++l) {
    const Buffer<int32_t>& gathered =
        plan.layer_pools[static_cast<size_t>(l)] == PoolKind::swa ? m.swa_kv_indices : m.kv_indices;
    for (int32_t i = 0; i < fb.bs; ++i)
      for (int32_t k = 0; k < k_lens[static_cast<size_t>(i)]; ++k)
        check.gathered_key(m.linear_kv_indices, m.linear_kv_indptr[i], m.block_size, gathered, k, l, i, k);
  }
  // Production's own convention, after the general check: linear per-token K/V has block size 1.
  check.equal("prefill layout descriptor block_size (linear per-token K/V)", m.block_size, 1);
}

}  // namespace

void MlaPlan::check_metadata(MetadataChecker& check) const {
  if (path == MlaPath::latent_decode)
    check_latent_decode(*this, check);
  else
    check_prefill(*this, check);
}

void MlaPlan::check_guards() const {
  positions.check_guards();
  for (const Buffer<int32_t>* b :
       {&decode.block_table, &decode.swa_block_table, &decode.cache_seqlens, &decode.cu_seqlens_q, &prefill.qo_indptr,
        &prefill.kv_lens, &prefill.kv_indptr, &prefill.kv_indices, &prefill.swa_kv_indices, &prefill.linear_kv_indptr,
        &prefill.linear_kv_indices})
    b->check_guards();
  decode.mask_indptr.check_guards();
  decode.custom_mask.check_guards();
}

}  // namespace kvfuzz::mla
