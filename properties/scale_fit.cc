// The scale fit (scale_fit.h): attention of one query at a trial scale, and its roots.
#include "properties/scale_fit.h"

#include <algorithm>
#include <cmath>

#include "properties/check.h"

namespace kvfuzz {
namespace {

// A fitted scale within 1% of the case's explains rounding beyond the declared precision
// (values:marginal), not a wrong scale: real ones are off by sqrt(2), 2, sqrt(head_dim), log2(e).
constexpr double kMinScaleChange = 0.01;

// One query's logits before scaling (q.k) and its visible keys' V rows, from the value source.
struct QueryKeys {
  std::vector<double> qk;  // [n]
  std::vector<double> v;   // [n][v_head_dim]
  double sink = -HUGE_VAL;  // the head's sink logit (Model::sinks): in the denominator only
};

QueryKeys query_keys(const CaseContext& ctx, int32_t layer, int64_t token, int32_t head) {
  const Model& m = ctx.scenario().model;
  const LogicalRow& lrow = ctx.logical().rows[static_cast<size_t>(ctx.row_of(token))];
  const int32_t column = lrow.queries[static_cast<size_t>(ctx.query_in_row(token))].column;
  const int32_t kv_head = head / (m.q_heads / m.kv_heads);
  std::vector<float> q(static_cast<size_t>(m.head_dim)), k(q.size()), v(static_cast<size_t>(m.v_head_dim));
  ctx.values().fill(layer, Tensor::q, lrow.request, column, head, q);
  QueryKeys out;
  if (!m.sinks.empty()) out.sink = m.sinks[static_cast<size_t>(head)];
  for (const int64_t c : expected_columns(ctx, layer, token)) {
    ctx.values().fill(layer, Tensor::k, lrow.request, static_cast<int32_t>(c), kv_head, k);
    ctx.values().fill(layer, Tensor::v, lrow.request, static_cast<int32_t>(c), kv_head, v);
    double dot = 0;
    for (size_t d = 0; d < q.size(); ++d) dot += static_cast<double>(q[d]) * k[d];
    out.qk.push_back(dot);
    out.v.insert(out.v.end(), v.begin(), v.end());
  }
  return out;
}

int64_t vd_all(const QueryKeys& keys) {
  return keys.qk.empty() ? 0 : static_cast<int64_t>(keys.v.size() / keys.qk.size());
}

struct Attention {
  double lse = -HUGE_VAL;
  std::vector<double> out, abs_out;  // [v_head_dim]: sum_k w_k v_k and sum_k w_k |v_k|
};

// Attention at scale alpha; with vd = 0 the LSE alone.
Attention attend_at(const QueryKeys& keys, double alpha, double softcap, int32_t vd) {
  Attention a;
  a.out.assign(static_cast<size_t>(vd), 0.0);
  a.abs_out = a.out;
  if (keys.qk.empty()) return a;
  std::vector<double> s(keys.qk.size());
  for (size_t i = 0; i < s.size(); ++i)
    s[i] = softcap > 0 ? softcap * std::tanh(alpha * keys.qk[i] / softcap) : alpha * keys.qk[i];
  const double mx = std::max(*std::max_element(s.begin(), s.end()), keys.sink);
  double total = std::exp(keys.sink - mx);
  for (size_t i = 0; i < s.size(); ++i) {
    const double w = std::exp(s[i] - mx);
    total += w;
    for (size_t d = 0; d < a.out.size(); ++d) {
      a.out[d] += w * keys.v[i * static_cast<size_t>(vd_all(keys)) + d];
      a.abs_out[d] += w * std::abs(keys.v[i * static_cast<size_t>(vd_all(keys)) + d]);
    }
  }
  for (size_t d = 0; d < a.out.size(); ++d) {
    a.out[d] /= total;
    a.abs_out[d] /= total;
  }
  a.lse = mx + std::log(total);
  return a;
}

// The alphas in [s / 1024, 1024 s] whose LSE is `lse`: sign changes on a geometric grid, bisected.
std::vector<double> lse_roots(const QueryKeys& keys, double lse, double sm_scale, double softcap) {
  std::vector<double> roots;
  const auto f = [&](double alpha) { return attend_at(keys, alpha, softcap, 0).lse - lse; };
  double lo = sm_scale / 1024.0, f_lo = f(lo);
  for (int i = 1; i <= 320; ++i) {
    const double hi = sm_scale * std::exp2(-10.0 + i / 16.0), f_hi = f(hi);
    if ((f_lo <= 0) != (f_hi <= 0)) {
      double a = lo, b = hi, fa = f_lo;
      for (int it = 0; it < 80; ++it) {
        const double mid = 0.5 * (a + b), fm = f(mid);
        if ((fa <= 0) == (fm <= 0)) a = mid, fa = fm;
        else b = mid;
      }
      roots.push_back(0.5 * (a + b));
    }
    lo = hi;
    f_lo = f_hi;
  }
  return roots;
}

bool agrees_at(const CaseContext& ctx, const PrecisionModel& pm, const Scenario& at_scale, const ScaleSample& x,
               const QueryKeys& keys) {
  const Model& m = at_scale.model;
  const Attention a = attend_at(keys, m.sm_scale, m.softcap, m.v_head_dim);
  const Tolerance tol = tolerance(at_scale, pm, static_cast<int64_t>(keys.qk.size()),
                                  ctx.oracle().qk_norm_at(x.layer, x.token, x.head), a.lse);
  if (!tol.bounded() || !(std::abs(a.lse - x.lse) <= 2 * tol.lse)) return false;
  for (size_t d = 0; d < a.out.size(); ++d)
    if (!(std::abs(a.out[d] - x.out[d]) <= 2 * tol.out(a.abs_out[d], a.out[d]))) return false;
  return true;
}

}  // namespace

std::optional<double> fitted_scale(const CaseContext& ctx, const PrecisionModel& pm,
                                   const std::vector<ScaleSample>& samples) {
  if (samples.empty()) return std::nullopt;
  const Model& m = ctx.scenario().model;
  std::vector<QueryKeys> keys;
  for (const ScaleSample& x : samples) keys.push_back(query_keys(ctx, x.layer, x.token, x.head));
  size_t first = 0;  // the roots come from the sample with the fewest keys: the cheapest to solve
  for (size_t i = 1; i < keys.size(); ++i)
    if (keys[i].qk.size() < keys[first].qk.size()) first = i;
  Scenario at_scale = ctx.scenario();
  for (const double alpha : lse_roots(keys[first], samples[first].lse, m.sm_scale, m.softcap)) {
    if (std::abs(alpha / m.sm_scale - 1.0) < kMinScaleChange) continue;  // rounding, not a scale
    at_scale.model.sm_scale = alpha;
    bool all = true;
    for (size_t i = 0; i < samples.size() && all; ++i) all = agrees_at(ctx, pm, at_scale, samples[i], keys[i]);
    if (all) return alpha;
  }
  return std::nullopt;
}

}  // namespace kvfuzz
