#include "backends/flashinfer/flashinfer_executor.h"

#include <numbers>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "backends/attend.h"
#include "backends/common/paged_view.h"
#include "backends/kv_store.h"

namespace kvfuzz::flashinfer {
namespace {

// FlashInfer reports log2-sum-exp; attend_row gives natural log.
void to_base2(Partial& p) {
  for (int64_t t = 0; t < p.tokens(); ++t)
    for (int32_t h = 0; h < p.heads(); ++h) p.lse(t, h) *= std::numbers::log2e_v<float>;
}

void to_natural(Partial& p) {
  for (int64_t t = 0; t < p.tokens(); ++t)
    for (int32_t h = 0; h < p.heads(); ++h) p.lse(t, h) *= std::numbers::ln2_v<float>;
}

// merge_state on two base-2 partials: FlashInfer's kernel weighs by 2^(lse - max); the natural-exp
// fallback weighs base-2 values by e^(lse - max), which over-weights the larger part.
void merge_base2(Partial& acc, Partial part, MergeKernel kernel) {
  if (kernel == MergeKernel::natural_exp) {
    acc.merge(part);  // exp/log applied to base-2 values: the result is what the fallback returns
    return;
  }
  to_natural(acc);
  to_natural(part);
  acc.merge(part);
  to_base2(acc);
}

void run_call(LayerContext& ctx, const WrapperPlan& w, const CallDescales* descales, const std::string& name,
              Partial& out) {
  const ReadSource pool = ctx.pool_source();
  const int32_t kv_heads = ctx.input().scenario.model.kv_heads;
  std::vector<int64_t> tokens;
  for (int32_t r = 0; r < w.rows; ++r) {
    const int64_t q0 = w.qo_indptr[r], q_len = w.qo_indptr[r + 1] - q0;
    tokens.resize(static_cast<size_t>(q_len));
    std::iota(tokens.begin(), tokens.end(), q0);
    const int64_t kv0 = w.kv_indptr[r], kv_entries = w.kv_indptr[r + 1] - kv0;
    const int64_t k_len = w.paged() ? paged_csr_length(kv_entries, w.kv_last_page_len[r], w.page_size) : kv_entries;
    const int64_t mask0 = w.has_mask ? w.mask_indptr[r] : 0;
    auto visible = [&](int64_t i, int64_t k) {
      const int64_t q_abs = causal_last_key(k_len, q_len, i);
      if (w.window_left >= 0 && k < q_abs - w.window_left) return false;
      if (w.has_mask) return w.custom_mask[mask0 + i * k_len + k] != 0;
      return !w.causal || k <= q_abs;
    };
    const int32_t batch_row = r / w.rows_per_batch_row;
    const std::optional<RowDescale> descale =
        descales ? std::optional(row_descale(*descales, name, w.rows, r, kv_heads, ctx.layer())) : std::nullopt;
    if (w.paged()) {
      attend_row(
          ctx, batch_row, tokens, k_len,
          [&](int64_t k) {
            return Read{pool, paged_csr_slot(w.kv_indices, kv0, k, w.page_size)};
          },
          visible, out, descale ? &*descale : nullptr);
    } else {
      attend_row(ctx, batch_row, tokens, k_len, [&](int64_t k) { return Read{ReadSource::batch, kv0 + k}; }, visible,
                 out);
    }
  }
}

}  // namespace

void run_flashinfer(const FlashInferPlan& plan, const RunInput& in, RunOutput& out) {
  const std::vector<int64_t> locs = step_cache_locs(in.batch);
  const auto layers = static_cast<int32_t>(in.scenario.model.layers.size());
  for (int32_t layer = 0; layer < layers; ++layer) {
    store_new_kv(layer, locs, in);
    LayerContext ctx(in, layer, out);
    const LayerGroupPlan& g = plan.groups[static_cast<size_t>(plan.group_of_layer[static_cast<size_t>(layer)])];
    Partial acc = ctx.make_partial();
    for (size_t c = 0; c < g.calls.size(); ++c) {
      Partial part = ctx.make_partial();
      run_call(ctx, g.calls[c], descales_of(plan.descales, layer, c), "flashinfer." + std::to_string(c), part);
      to_base2(part);
      if (c == 0) acc = std::move(part);
      else merge_base2(acc, std::move(part), plan.merge);
    }
    to_natural(acc);
    ctx.write_output(acc);
  }
}

}  // namespace kvfuzz::flashinfer
