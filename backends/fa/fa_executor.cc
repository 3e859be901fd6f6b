// See fa_executor.h.
#include "backends/fa/fa_executor.h"

#include <optional>

#include "backends/attend.h"
#include "backends/common/paged_view.h"
#include "backends/kv_store.h"

namespace kvfuzz::fa {
namespace {

// Decode-context parallelism: the layer-pool slot whose token a rank's local slot holds (what the
// rank's slot mapping wrote there); a local slot outside the rank's pool or never written is a
// violation (the rank would read another rank's layout or stale memory).
int64_t rank_pool_slot(const FaCall& call, int64_t local, int32_t batch_row, int64_t key, int32_t layer) {
  const int64_t slot = call.rank_slots[local];  // checked: inside the rank's pool
  if (slot < 0)
    throw Violation(call.name + ".rank_slots",
                    "key " + std::to_string(key) + " reads local slot " + std::to_string(local) +
                        ", which this rank's slot mapping never wrote",
                    {layer, batch_row, -1});
  return slot;
}

// One flash_attn_with_kvcache call. FlashAttention's mask: with causal or a window (W, 0) the
// right edge is the bottom-right diagonal; a window also cuts keys below it - W.
void run_call(LayerContext& ctx, const FaCall& call, const CallDescales* descales, int32_t window_left,
              const std::vector<int32_t>& rows_of_tokens, Partial& part) {
  const int32_t kv_heads = ctx.input().scenario.model.kv_heads;
  const bool right_edge = call.causal || window_left >= 0;
  std::vector<int64_t> q_tokens;
  for (int32_t b = 0; b < call.rows; ++b) {
    const int32_t q_begin = call.cu_seqlens_q[b], q_end = call.cu_seqlens_q[b + 1];
    const int64_t k_len = call.cache_seqlens[b];
    const int64_t q_len = q_end - q_begin;
    q_tokens.clear();
    for (int32_t t = q_begin; t < q_end; ++t) q_tokens.push_back(t);
    if (q_tokens.empty()) continue;
    const int64_t row_offset = int64_t{b} * call.width;
    const int32_t batch_row = q_begin >= 0 && q_begin < static_cast<int32_t>(rows_of_tokens.size())
                                  ? rows_of_tokens[static_cast<size_t>(q_begin)]
                                  : -1;
    const std::optional<RowDescale> descale =
        descales ? std::optional(row_descale(*descales, call.name, call.rows, b, kv_heads, ctx.layer())) : std::nullopt;
    attend_row(
        ctx, batch_row, q_tokens, k_len,
        [&](int64_t k) {
          const int64_t slot = page_table_slot(call.page_table, row_offset, k, call.view_page_size);
          return Read{ctx.pool_source(),
                      call.rank_slots.capacity() > 0 ? rank_pool_slot(call, slot, batch_row, k, ctx.layer()) : slot};
        },
        [&](int64_t i, int64_t k) {
          const int64_t last = causal_last_key(k_len, q_len, i);
          if (right_edge && k > last) return false;
          return window_left < 0 || k >= last - window_left;
        },
        part, descale ? &*descale : nullptr);
    // s_aux: the kernel's softmax takes the sink in, for its own query tokens
    if (!call.sinks.empty())
      for (int32_t t = q_begin; t < q_end; ++t) part.fold_sinks(t, call.sinks);
  }
}

}  // namespace

void run_fa(const FaPlan& plan, const RunInput& in, RunOutput& out) {
  const ForwardBatch& fb = in.batch;
  const std::vector<int32_t> rows_of_tokens = token_rows(fb);  // [num_tokens], for reports
  const std::vector<int64_t> locs = step_cache_locs(fb);
  for (int32_t layer = 0; layer < out.layers; ++layer) {
    store_new_kv(layer, locs, in);
    LayerContext ctx(in, layer, out);
    const Layer& l = plan.layers[static_cast<size_t>(layer)];
    // window_size = (sliding_window_size, 0) for sliding-window layers, (-1, -1) otherwise.
    const int32_t window_left = l.kind == LayerKind::sliding_window ? l.window : -1;
    std::optional<Partial> merged;
    const std::vector<FaCall>& parts = plan.group_of(layer).parts;
    for (size_t j = 0; j < parts.size(); ++j) {
      Partial part = ctx.make_partial();
      run_call(ctx, parts[j], descales_of(plan.descales, layer, j), window_left, rows_of_tokens, part);
      if (merged)
        merged->merge(part);  // merge_state(o_main, lse_main, o_expand, lse_expand)
      else
        merged = std::move(part);
    }
    if (merged) ctx.write_output(*merged);
  }
}

}  // namespace kvfuzz::fa
