// One kernel row of attention, for every executor: the queries of the row read keys [0, k_len)
// through the backend's metadata and the row's mask.
//
// Where it sits: executors translate their metadata into (which batch tokens are the queries,
// where key k lives, which keys each query may see) and call attend_row(); this file does the
// rest the same way for all of them — bounds-checks every key of the extent (a GPU kernel loads
// whole tiles, masked keys included), records the keys each query uses in the read log, fetches
// K/V from the layer's pool or from the batch's new-token tensors, and accumulates
// (attention_math.h). GQA: q head h reads kv head h / (q_heads / kv_heads).
//
//   attend_row(ctx, row, q_tokens, k_len,
//              [&](int64_t k) { return Read{ReadSource::full, page_table_slot(pt, off, k, ps)}; },
//              [&](int64_t i, int64_t k) { return k <= causal_last_key(k_len, q_len, i); },
//              partial);
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "backends/common/partial.h"
#include "backends/descales.h"

namespace kvfuzz {

class LayerContext {
 public:
  LayerContext(const RunInput& in, int32_t layer, RunOutput& out);

  // The pool this layer reads: SWA layers of a hybrid model read the SWA pool.
  ReadSource pool_source() const { return pool_.kind == PoolKind::swa ? ReadSource::swa : ReadSource::full; }
  int32_t layer() const { return layer_; }
  const RunInput& input() const { return in_; }
  Partial make_partial() const;

  // Whether a key reference lies in its pool or the batch; throws Violation when it does not,
  // unless the run is lenient (RunInput::lenient), which records the violation and returns false.
  bool check(const Read& r, const Where& where) const;
  const float* k(const Read& r, int32_t kv_head, const Where& where) const;
  const float* v(const Read& r, int32_t kv_head, const Where& where) const;
  void record(int64_t token, const Read& r) { out_.reads.record(layer_, token, r); }
  // Copies a finished Partial into the run's output for this layer.
  void write_output(const Partial& p);

  // The fp8 scales this layer's pool is read by (1: unscaled; KvPool::k_scale).
  float k_scale() const { return pool_.k_scale; }
  float v_scale() const { return pool_.v_scale; }
  float sm_scale() const { return sm_scale_; }
  float softcap() const { return softcap_; }

 private:
  const RunInput& in_;
  int32_t layer_;
  RunOutput& out_;
  const KvPool& pool_;
  float sm_scale_, softcap_;
};

// `values` scaled by factor (a descale over the layer's scale), as floats, into `to`; the values
// themselves where factor is 1.
inline const float* descaled(const float* values, int32_t n, double factor, std::vector<float>& to) {
  if (factor == 1.0) return values;
  to.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) to[static_cast<size_t>(i)] = static_cast<float>(values[i] * factor);
  return to.data();
}

template <class KeyOf, class Visible>
void attend_row(LayerContext& ctx, int32_t batch_row, std::span<const int64_t> q_tokens, int64_t k_len, KeyOf key_of,
                Visible visible, Partial& partial, const RowDescale* descale = nullptr) {
  const Model& m = ctx.input().scenario.model;
  const int32_t group = m.q_heads / m.kv_heads;
  std::vector<Read> keys;
  std::vector<uint8_t> in_bounds;
  keys.reserve(static_cast<size_t>(k_len > 0 ? k_len : 0));
  const Where row_where{ctx.layer(), batch_row, q_tokens.empty() ? -1 : q_tokens[0]};
  for (int64_t k = 0; k < k_len; ++k) {
    keys.push_back(key_of(k));
    in_bounds.push_back(ctx.check(keys.back(), row_where));
  }
  std::vector<int64_t> used;
  std::vector<float> q_buf, k_buf, v_buf;
  SoftmaxAccumulator acc(m.v_head_dim, ctx.input().scenario.values.dtype);
  for (size_t i = 0; i < q_tokens.size(); ++i) {
    const int64_t token = q_tokens[i];
    const Where where{ctx.layer(), batch_row, token};
    used.clear();
    for (int64_t k = 0; k < k_len; ++k) {
      if (!visible(static_cast<int64_t>(i), k)) continue;
      ctx.record(token, keys[static_cast<size_t>(k)]);
      if (in_bounds[static_cast<size_t>(k)]) used.push_back(k);
    }
    for (int32_t h = 0; h < m.q_heads; ++h) {
      const float* q = ctx.input().tensors.q(ctx.layer(), token, h);
      acc.reset();
      // An fp8 call's descales (RowDescale): its K and V are the stored values times its descale
      // over the layer's scale; a factor of 1 (no descales, or the layer's own) reads them as stored.
      const auto g = static_cast<size_t>(h / group);
      const double fq = descale == nullptr || descale->q.empty() ? 1.0 : descale->q[g],
                   fk = descale == nullptr ? 1.0 : descale->k[g] / ctx.k_scale(),
                   fv = descale == nullptr ? 1.0 : descale->v[g] / ctx.v_scale();
      q = descaled(q, m.head_dim, fq, q_buf);
      for (int64_t k : used) {
        const Read& r = keys[static_cast<size_t>(k)];
        const float* kr = descaled(ctx.k(r, h / group, where), m.head_dim, fk, k_buf);
        acc.add(logit(q, kr, m.head_dim, ctx.sm_scale(), ctx.softcap()),
                descaled(ctx.v(r, h / group, where), m.v_head_dim, fv, v_buf));
      }
      acc.finish(partial.out(token, h), &partial.lse(token, h));
    }
  }
}

}  // namespace kvfuzz
