// A slow, obviously correct attention in __float128: the yardstick of the oracle's accuracy.
//
// Where it sits: only in oracle_test.cc. For one (layer, row, query, q head) it reads Q, K and V
// from the value source, takes the visible columns from logical.h, and evaluates SEMANTICS.md §3
// literally in quad precision (libquadmath expq, tanhq, logq): no blocking, no online softmax.
// Header-only, so a test links it by including it (and linking quadmath).
//
//   QuadAttention a = quad_attention(s, lb, values, layer, row, query, head);
#pragma once

#if defined(__SIZEOF_FLOAT128__) && __has_include(<quadmath.h>)
#define KVFUZZ_HAVE_QUAD 1

#include <quadmath.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "reference/logical.h"
#include "reference/values.h"

namespace kvfuzz {

struct QuadAttention {
  std::vector<__float128> out;  // [v_head_dim]; zeros when nothing is visible
  __float128 lse = 0;           // natural log of the sum of e^logit; -inf when nothing is visible
  double max_abs_v = 0;         // largest |V| element over the visible keys: the error norm
  bool empty = true;            // no visible key
};

inline QuadAttention quad_attention(const Scenario& s, const LogicalBatch& lb, const ValueSource& values, int32_t layer,
                             int32_t row, int32_t query, int32_t q_head) {
  const Model& m = s.model;
  const LogicalRow& r = lb.rows[static_cast<size_t>(row)];
  const int32_t kv_head = q_head / (m.q_heads / m.kv_heads);
  std::vector<float> q(static_cast<size_t>(m.head_dim)), k(q.size()), v(static_cast<size_t>(m.v_head_dim));
  values.fill(layer, Tensor::q, r.request, r.queries[static_cast<size_t>(query)].column, q_head, q);

  std::vector<__float128> logits;
  std::vector<std::vector<float>> vs;
  for (const ColumnRange& range : visible(m.layers[static_cast<size_t>(layer)], r, query)) {
    for (int32_t c = range.begin; c < range.end; ++c) {
      values.fill(layer, Tensor::k, r.request, c, kv_head, k);
      values.fill(layer, Tensor::v, r.request, c, kv_head, v);
      __float128 dot = 0;
      for (size_t d = 0; d < q.size(); ++d) dot += static_cast<__float128>(q[d]) * static_cast<__float128>(k[d]);
      __float128 logit = static_cast<__float128>(m.sm_scale) * dot;
      if (m.softcap > 0) {
        const __float128 cap = m.softcap;
        logit = cap * tanhq(logit / cap);
      }
      logits.push_back(logit);
      vs.push_back(v);
    }
  }

  QuadAttention a;
  a.out.assign(static_cast<size_t>(m.v_head_dim), 0);
  // An attention sink (Model::sinks): one more term of the sum, in the denominator only.
  const bool sink = !m.sinks.empty();
  const __float128 z = sink ? static_cast<__float128>(m.sinks[static_cast<size_t>(q_head)]) : -HUGE_VALQ;
  if (logits.empty() && !sink) {
    a.lse = -HUGE_VALQ;
    return a;
  }
  a.empty = false;
  const __float128 max = logits.empty() ? z : std::max(*std::max_element(logits.begin(), logits.end()), z);
  __float128 sum = sink ? expq(z - max) : 0;
  for (size_t j = 0; j < logits.size(); ++j) {
    const __float128 p = expq(logits[j] - max);
    sum += p;
    for (size_t d = 0; d < a.out.size(); ++d) {
      a.out[d] += p * static_cast<__float128>(vs[j][d]);
      a.max_abs_v = std::max(a.max_abs_v, static_cast<double>(std::fabs(vs[j][d])));
    }
  }
  for (__float128& o : a.out) o /= sum;
  a.lse = max + logq(sum);
  return a;
}


}  // namespace kvfuzz

#endif
