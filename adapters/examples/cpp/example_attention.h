// Attention arithmetic the C++ example executors share: the model from the manifest, the keys a
// kernel row reads, one row of softmax attention, and the LSE merge of partial results.
//
// Where it sits: included by the family executors of adapters/examples/cpp/ (page_table_executor.cc,
// paged_csr_executor.cc, ...), which decide from their metadata which keys each query reads;
// this file decides how the numbers combine. Written from the semantics in double precision,
// not from kvfuzz's C++ executors (it sees only kvfuzz_executor.h).
//
//   Model m = Model::of(manifest, call);
//   std::vector<KeyRef> keys;
//   if (!paged_keys(call, m, layer, pages, n_pages, page_size, k_len, keys)) return 1;
//   Partial part(m);
//   attend(m, call, layer, q0, q_len, keys, [&](int64_t i, int64_t k) { return k <= last(i); }, part);
//   merged.merge(part);
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

#include "adapters/examples/cpp/example_break.h"
#include "backends/external/kvfuzz_executor.h"

namespace kvfuzz_example {

inline constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct Model {
  int64_t tokens, q_heads, kv_heads, head_dim, v_head_dim;
  bool mla;
  double sm_scale, softcap;

  static Model of(const nlohmann::json& manifest, const kvfuzz_call* call) {
    const nlohmann::json& m = manifest.at("case").at("model");
    return {call->out_shape[1],           m.at("q_heads").get<int64_t>(),    m.at("kv_heads").get<int64_t>(),
            m.at("head_dim").get<int64_t>(), m.at("v_head_dim").get<int64_t>(), m.at("mla").get<bool>(),
            m.at("sm_scale").get<double>(),  m.at("softcap").get<double>()};
  }
};

// One key as a kernel reads it: its K and V at kv head 0, and the floats from one kv head to the next.
struct KeyRef {
  const float* k;
  const float* v;
  int64_t k_head_stride, v_head_stride;
};

// Key of pool slot `slot` of `layer` (MLA: V is the first v_head_dim values of K).
inline KeyRef pool_key(const kvfuzz_call* call, const Model& m, int layer, int64_t slot) {
  const float* k = static_cast<const float*>(call->k_cache[layer].data) + slot * m.kv_heads * m.head_dim;
  if (m.mla) return {k, k, m.head_dim, m.head_dim};
  const float* v = static_cast<const float*>(call->v_cache[layer].data) + slot * m.kv_heads * m.v_head_dim;
  return {k, v, m.head_dim, m.v_head_dim};
}

// Key of batch token `token` of `layer`: this step's new K/V (k_new, v_new).
inline KeyRef batch_key(const kvfuzz_call* call, const Model& m, int layer, int64_t token) {
  const int64_t row = static_cast<int64_t>(layer) * m.tokens + token;
  const float* k = static_cast<const float*>(call->k_new.data) + row * m.kv_heads * m.head_dim;
  if (m.mla) return {k, k, m.head_dim, m.head_dim};
  return {k, static_cast<const float*>(call->v_new.data) + row * m.kv_heads * m.v_head_dim, m.head_dim, m.v_head_dim};
}

// The keys of a paged row: key k < k_len at slot pages[k / ps] * ps + k % ps of the layer's pool
// (token CSRs: ps = 1). The broken variants drop_last_key, next_page and freed_slot act here, so
// keys.size() is the row's key count. False, with call->error written, for a page or slot outside
// its array.
template <class Page>
bool paged_keys(const kvfuzz_call* call, const Model& m, int layer, const Page* pages, int64_t n_pages, int64_t ps,
                int64_t k_len, std::vector<KeyRef>& keys) {
  const Break b = broken();
  if (b == Break::drop_last_key && k_len > 1) --k_len;
  const int64_t slots = call->k_cache[layer].shape[0];
  keys.clear();
  for (int64_t k = 0; k < k_len; ++k) {
    if (k / ps >= n_pages) {
      kvfuzz_fail(call, "layer %d: key %lld of a row with %lld pages of %lld", layer, (long long)k, (long long)n_pages, (long long)ps);
      return false;
    }
    int64_t page = pages[k / ps];
    if (b == Break::next_page && k / ps == (k_len - 1) / ps) ++page;
    int64_t slot = page * ps + k % ps;
    if (b == Break::freed_slot && k == 0) slot = slots - 1;  // the pool's last slot: past every allocation
    if (slot < 0 || slot >= slots) {
      kvfuzz_fail(call, "layer %d: key %lld at slot %lld, outside the pool of %lld slots", layer, (long long)k, (long long)slot, (long long)slots);
      return false;
    }
    keys.push_back(pool_key(call, m, layer, slot));
  }
  return true;
}

// A partial result of one layer: out [tokens, q_heads, v_head_dim], natural-log lse [tokens, q_heads].
struct Partial {
  int64_t vd;
  std::vector<double> out, lse;

  explicit Partial(const Model& m)
      : vd(m.v_head_dim),
        out(static_cast<size_t>(m.tokens * m.q_heads * m.v_head_dim), 0.0),
        lse(static_cast<size_t>(m.tokens * m.q_heads), kNegInf) {}

  // merge_state of (token, head) row r with another result over disjoint keys: weights exp(lse_x - lse).
  void merge_row(size_t r, const double* o_b, double l_b) {
    const double l_a = lse[r];
    if (l_b == kNegInf) return;
    const double l = l_a == kNegInf ? l_b : std::max(l_a, l_b) + std::log1p(std::exp(-std::fabs(l_a - l_b)));
    const double w_a = l_a == kNegInf ? 0.0 : std::exp(l_a - l), w_b = std::exp(l_b - l);
    double* o = &out[r * static_cast<size_t>(vd)];
    for (int64_t d = 0; d < vd; ++d) o[d] = w_a * o[d] + w_b * o_b[d];
    lse[r] = l;
  }
  void merge(const Partial& b) {
    for (size_t r = 0; r < lse.size(); ++r) merge_row(r, &b.out[r * static_cast<size_t>(vd)], b.lse[r]);
  }

  // Into the layer's slice of call->out and call->lse (lse_base2 breaks the LSE's base here).
  void write(const kvfuzz_call* call, int layer) const {
    const double lse_scale = broken() == Break::lse_base2 ? 1.0 / std::log(2.0) : 1.0;
    const size_t o_at = static_cast<size_t>(layer) * out.size(), l_at = static_cast<size_t>(layer) * lse.size();
    for (size_t i = 0; i < out.size(); ++i) call->out[o_at + i] = static_cast<float>(out[i]);
    for (size_t i = 0; i < lse.size(); ++i) call->lse[l_at + i] = static_cast<float>(lse[i] * lse_scale);
  }
};

// Softmax attention of queries q0 .. q0 + q_len - 1 (batch tokens) of `layer` over `keys`, where
// query i sees key k iff visible(i, k); results go to `part` (a query that sees nothing: 0, -inf).
// Logits: sm_scale * q.k, then softcap * tanh(s / softcap); GQA: q head h reads kv head
// h / (q_heads / kv_heads).
template <class Visible>
void attend(const Model& m, const kvfuzz_call* call, int layer, int64_t q0, int64_t q_len, const std::vector<KeyRef>& keys,
            Visible visible, Partial& part) {
  const float* q = static_cast<const float*>(call->q.data) + static_cast<int64_t>(layer) * m.tokens * m.q_heads * m.head_dim;
  const int64_t group = m.q_heads / m.kv_heads;
  std::vector<double> s(keys.size());
  for (int64_t i = 0; i < q_len; ++i) {
    for (int64_t h = 0; h < m.q_heads; ++h) {
      const int64_t kvh = h / group;
      const float* qv = q + ((q0 + i) * m.q_heads + h) * m.head_dim;
      double max = kNegInf;
      for (size_t k = 0; k < keys.size(); ++k) {
        s[k] = kNegInf;
        if (!visible(i, static_cast<int64_t>(k))) continue;
        const float* kv = keys[k].k + kvh * keys[k].k_head_stride;
        double dot = 0.0;
        for (int64_t d = 0; d < m.head_dim; ++d) dot += static_cast<double>(qv[d]) * kv[d];
        double logit = dot * m.sm_scale;
        if (m.softcap > 0.0) logit = m.softcap * std::tanh(logit / m.softcap);
        s[k] = logit;
        max = std::max(max, logit);
      }
      if (max == kNegInf) continue;
      const size_t r = static_cast<size_t>((q0 + i) * m.q_heads + h);
      std::vector<double> o(static_cast<size_t>(m.v_head_dim), 0.0);
      double total = 0.0;
      for (size_t k = 0; k < keys.size(); ++k) {
        if (s[k] == kNegInf) continue;
        const double w = std::exp(s[k] - max);
        const float* vv = keys[k].v + kvh * keys[k].v_head_stride;
        for (int64_t d = 0; d < m.v_head_dim; ++d) o[static_cast<size_t>(d)] += w * vv[d];
        total += w;
      }
      for (double& x : o) x /= total;
      part.merge_row(r, o.data(), max + std::log(total));
    }
  }
}

}  // namespace kvfuzz_example
