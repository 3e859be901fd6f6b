// The mla executors: run attention from an MlaPlan alone.
//
// Where it sits: MlaPlan + pools + batch tensors -> **run_mla** -> RunOutput (+ read log). Each
// layer first writes the step's new K/V into its pool (set_kv_buffer), then runs one kernel:
//   - latent decode (FlashMLA): per kernel row, keys [0, cache_seqlens) through the block table,
//     one latent head (V = first v_head_dim of K, as the pool stores it), split into num_splits
//     chunks merged by LSE; the structural rule is bottom-right causal, or the tree mask for
//     verify;
//   - prefill: gather the rows' tokens from the pool into the linear buffer along the token CSR,
//     then MHA over it, key k of row i at the linear entry the descriptor names. A linear entry
//     holds the K/V of the pool slot it was gathered from, so its read is logged as that slot.
// Both AND the layer's window or chunk on positions (mla_visibility.h).
#include <algorithm>

#include "backends/attend.h"
#include "backends/common/paged_view.h"
#include "backends/kv_store.h"
#include "backends/mla/mla_executor.h"
#include "backends/mla/mla_visibility.h"

namespace kvfuzz::mla {
namespace {

std::vector<int64_t> token_range(int64_t begin, int64_t end) {
  std::vector<int64_t> tokens;
  for (int64_t t = begin; t < end; ++t) tokens.push_back(t);
  return tokens;
}

// Per query of a row: the lowest key position its layer keeps (window, chunk).
std::vector<int64_t> lowest_positions(const MlaPlan& plan, const Layer& layer, int64_t q0, int64_t q_len) {
  std::vector<int64_t> lowest(static_cast<size_t>(q_len));
  for (int64_t i = 0; i < q_len; ++i) lowest[static_cast<size_t>(i)] = lowest_position(layer, plan.positions[q0 + i]);
  return lowest;
}

void run_latent_decode(const MlaPlan& plan, LayerContext& ctx, const Layer& layer) {
  const LatentDecodeMeta& m = plan.decode;
  const Buffer<int32_t>& table =
      plan.layer_pools[static_cast<size_t>(ctx.layer())] == PoolKind::swa ? m.swa_block_table : m.block_table;
  const ReadSource source = ctx.pool_source();
  const int32_t splits = std::max(1, m.num_splits);
  std::vector<Partial> parts;
  for (int32_t s = 0; s < splits; ++s) parts.push_back(ctx.make_partial());

  for (int32_t r = 0; r < m.rows; ++r) {
    const int64_t q0 = m.cu_seqlens_q[r], q_len = m.cu_seqlens_q[r + 1] - q0;
    const std::vector<int64_t> tokens = token_range(q0, q0 + q_len);
    const int64_t k_len = m.cache_seqlens[m.seqlen_index(r)];
    const int64_t row_offset = m.table_row(r);
    const int64_t mask_row = m.tree_mask ? m.mask_indptr[r] : 0;
    const int64_t drafts_from = k_len - q_len;  // verify: keys from here on are the row's own drafts
    const std::vector<int64_t> lowest = lowest_positions(plan, layer, q0, q_len);
    auto key_position = [&](int64_t k) -> int64_t {
      return m.tree_mask && k >= drafts_from ? plan.positions[q0 + k - drafts_from] : k;
    };
    auto visible = [&](int64_t i, int64_t k) {
      const bool structural =
          m.tree_mask ? m.custom_mask[mask_row + i * k_len + k] != 0 : k <= causal_last_key(k_len, q_len, i);
      return structural && key_position(k) >= lowest[static_cast<size_t>(i)];
    };
    const int32_t batch_row = r / m.rows_per_request;
    const int64_t chunk = std::max<int64_t>(1, (k_len + splits - 1) / splits);
    for (int32_t s = 0; s < splits; ++s) {
      const int64_t lo = s * chunk, hi = std::min(k_len, lo + chunk);
      if (lo >= hi) continue;
      attend_row(
          ctx, batch_row, tokens, hi - lo,
          [&](int64_t k) {
            return Read{source, page_table_slot(table, row_offset, lo + k, plan.page_size)};
          },
          [&](int64_t i, int64_t k) { return visible(i, lo + k); }, parts[static_cast<size_t>(s)]);
    }
  }
  for (int32_t s = 1; s < splits; ++s) parts[0].merge(parts[static_cast<size_t>(s)]);
  ctx.write_output(parts[0]);
}

// The gather kernel: linear entry e receives the K/V of pool slot indices[e].
Buffer<int64_t> gather(const Buffer<int32_t>& indices, int64_t total) {
  Buffer<int64_t> linear("linear_kv", total);
  for (int64_t e = 0; e < total; ++e) linear.set(e, indices[e]);
  return linear;
}

void run_prefill(const MlaPlan& plan, LayerContext& ctx, const Layer& layer, const Buffer<int64_t>& linear) {
  const PrefillMeta& m = plan.prefill;
  const ReadSource source = ctx.pool_source();
  Partial part = ctx.make_partial();
  for (int32_t r = 0; r < m.kv_lens.capacity(); ++r) {
    const int64_t q0 = m.qo_indptr[r], q_len = m.qo_indptr[r + 1] - q0;
    const int64_t k_len = m.kv_lens[r];
    const int64_t first = m.linear_kv_indptr[r];
    const std::vector<int64_t> lowest = lowest_positions(plan, layer, q0, q_len);
    attend_row(
        ctx, r, token_range(q0, q0 + q_len), k_len,
        [&](int64_t k) {
          return Read{source, linear[paged_csr_slot(m.linear_kv_indices, first, k, m.block_size)]};
        },
        [&](int64_t i, int64_t k) {
          return k <= causal_last_key(k_len, q_len, i) && k >= lowest[static_cast<size_t>(i)];
        },
        part);
  }
  ctx.write_output(part);
}

}  // namespace

void run_mla(const MlaPlan& plan, const RunInput& in, RunOutput& out) {
  const std::vector<int64_t> locs = step_cache_locs(in.batch);
  Buffer<int64_t> full_linear, swa_linear;
  if (plan.path == MlaPath::prefill) {
    const int64_t total = plan.prefill.kv_indptr[plan.prefill.kv_lens.capacity()];
    full_linear = gather(plan.prefill.kv_indices, total);
    if (plan.hybrid) swa_linear = gather(plan.prefill.swa_kv_indices, total);
  }
  for (int32_t l = 0; l < static_cast<int32_t>(in.scenario.model.layers.size()); ++l) {
    store_new_kv(l, locs, in);
    LayerContext ctx(in, l, out);
    const Layer& layer = in.scenario.model.layers[static_cast<size_t>(l)];
    if (plan.path == MlaPath::latent_decode) {
      run_latent_decode(plan, ctx, layer);
    } else {
      run_prefill(plan, ctx, layer,
                  plan.layer_pools[static_cast<size_t>(l)] == PoolKind::swa ? swa_linear : full_linear);
    }
  }
}

}  // namespace kvfuzz::mla
