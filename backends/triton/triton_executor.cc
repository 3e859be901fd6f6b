// The Triton executor (see triton_executor.h): decode kernel (split-KV, two stages) and extend
// kernel (prefix CSR + k_extend, one softmax), translated into attend_row calls.
#include "backends/triton/triton_executor.h"

#include <algorithm>

#include "backends/triton/triton_split_range.h"

namespace kvfuzz {
namespace {

void run_decode_kernel(const TritonPlan& p, const KvCsr& csr, LayerContext& ctx) {
  const ReadSource pool = ctx.pool_source();
  const int32_t heads = ctx.input().scenario.model.q_heads;
  const int32_t vd = ctx.input().scenario.model.v_head_dim;
  Partial result = ctx.make_partial();
  for (int32_t split = 0; split < p.max_kv_splits; ++split) {
    Partial part = ctx.make_partial();  // attn_logits / attn_lse [.., split]
    for (int32_t r = 0; r < p.rows; ++r) {
      const int64_t start = csr.kv_indptr[r];
      const int64_t kv_len = csr.kv_indptr[r + 1] - start;
      const SplitRange range = split_range(kv_len, std::max(1, csr.num_kv_splits[r]), split);
      if (range.empty()) continue;  // stage 1 stores nothing, stage 2 skips it
      const int64_t token = r;      // one query per kernel row
      attend_row(
          ctx, r / p.queries_per_request, std::span<const int64_t>(&token, 1), range.end - range.begin,
          [&](int64_t k) {
            return Read{pool, csr.kv_indices[start + range.begin + k]};
          },
          [](int64_t, int64_t) { return true; }, part);
      // Stage 2: fold this split into the row's running result (split order).
      for (int32_t h = 0; h < heads; ++h)
        merge_states(result.out(token, h), result.lse(token, h), part.out(token, h), part.lse(token, h), vd,
                     result.out(token, h), &result.lse(token, h));
    }
  }
  // Stage 2's finish: the sinks join each row's merged sum once.
  if (!p.sinks.empty())
    for (int32_t r = 0; r < p.rows; ++r) result.fold_sinks(r, p.sinks);
  ctx.write_output(result);
}

void run_extend_kernel(const TritonPlan& p, const KvCsr& csr, LayerContext& ctx) {
  const ReadSource pool = ctx.pool_source();
  Partial result = ctx.make_partial();
  std::vector<int64_t> tokens;
  for (int32_t i = 0; i < p.padded_bs; ++i) {
    const int64_t q0 = p.qo_indptr[i];
    const int64_t q_len = p.qo_indptr[i + 1] - q0;
    const int64_t start = csr.kv_indptr[i];
    const int64_t prefix = std::max<int64_t>(0, csr.kv_indptr[i + 1] - start);
    const int64_t offset = csr.kv_offsets[i];
    tokens.clear();
    for (int64_t m = 0; m < q_len; ++m) tokens.push_back(q0 + m);
    const int64_t mask_start = p.use_custom_mask ? p.mask_indptr[i] : 0;
    const int64_t mask_stride = prefix + q_len + offset;
    auto key_of = [&](int64_t k) {
      return k < prefix ? Read{pool, csr.kv_indices[start + k]} : Read{ReadSource::batch, q0 + k - prefix};
    };
    // Positions: the kernel's q_id / k_id. Production derives them as prefix_len + m (window
    // relative), which equals the position for extends and chains; for tree drafts the position
    // is prefix + depth, taken here from the batch (triton_backend.py).
    auto visible = [&](int64_t m, int64_t k) {
      int64_t pos_k;
      if (k < prefix) {
        pos_k = offset + k;  // stage 1: prefix columns are positions; custom-mask prefix skipped
      } else {
        const int64_t n = k - prefix;
        const bool allowed =
            p.use_custom_mask ? p.custom_mask[mask_start + m * mask_stride + offset + prefix + n] != 0 : n <= m;
        if (!allowed) return false;
        pos_k = p.positions[q0 + n];
      }
      const int64_t pos_q = p.positions[q0 + m];
      switch (csr.kind) {
        case LayerKind::full:
          return true;
        case LayerKind::sliding_window:
          return pos_q - pos_k <= csr.window_or_chunk;
        case LayerKind::chunked:
          return pos_k >= pos_q / csr.window_or_chunk * csr.window_or_chunk;
      }
      return true;
    };
    attend_row(ctx, i, tokens, prefix + q_len, key_of, visible, result);
    if (!p.sinks.empty())
      for (const int64_t t : tokens) result.fold_sinks(t, p.sinks);
  }
  ctx.write_output(result);
}

}  // namespace

void run_triton_layer(const TritonPlan& plan, LayerContext& ctx) {
  const KvCsr& csr = plan.csr_of(ctx.layer());
  switch (plan.kernel) {
    case TritonKernel::none:
      return;
    case TritonKernel::decode:
      run_decode_kernel(plan, csr, ctx);
      return;
    case TritonKernel::extend:
      run_extend_kernel(plan, csr, ctx);
      return;
  }
}

}  // namespace kvfuzz
