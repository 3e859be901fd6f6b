// The per-element agreement bound (tolerance.h), step by step as derived there.
#include "properties/tolerance.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/common/attention_math.h"
#include "reference/values.h"

namespace kvfuzz {
namespace {

constexpr double kU = 0x1p-24;           // fp32 unit roundoff
constexpr double kExp = 8.0 * kU;        // relative error of one exp
constexpr double kOracleError = 1e-12;   // the oracle's own, far above its measured 1e-13 normwise

double gamma(double m) { return m * kU / (1.0 - m * kU); }

// Absolute error of rounding a p in [0, 1] to d below its normal range: half the subnormal spacing
// (fp32 P is not rounded; 2^-126 then covers an fp32 exp that underflows).
double subnormal_error(DType d) {
  switch (d) {
    case DType::fp32: return 0x1p-126;
    case DType::fp16: return 0x1p-25;
    case DType::bf16: return 0x1p-134;
    case DType::fp8_e4m3: return 0x1p-10;
  }
  return 1.0;
}

}  // namespace

PrecisionModel cpu_precision(const Scenario& s) {
  return {s.values.dtype, DType::fp32, s.batch.kv_splits + 4, kTile};
}

PrecisionModel precision_of(const Backend& backend, const Scenario& s) {
  return precision_of(backend, s, RunOutput());
}

PrecisionModel precision_of(const Backend& backend, const Scenario& s, const RunOutput& run) {
  PrecisionModel pm = cpu_precision(s);
  const KernelRounding r = run.rounding.value_or(backend.rounding());
  if (r.p_dtype) pm.p_dtype = *r.p_dtype;
  pm.out_dtype = r.out_dtype.value_or(s.values.dtype);
  pm.max_merges += r.extra_merges;
  pm.row_sum_rounded = r.row_sum_rounded;
  pm.qk_products_rounded = r.qk_products == QkProducts::cache ||
                           (r.qk_products == QkProducts::cache_mha && s.model.q_heads == s.model.kv_heads);
  if (r.tile_keys > 0) pm.tile_keys = r.tile_keys;
  pm.split_keys = r.split_keys;
  return pm;
}

double Tolerance::out(double s, double o) const { return s_coef * s + o_coef * std::abs(o) + abs; }

Tolerance tolerance(const Scenario& s, const PrecisionModel& pm, int64_t n, double qk_norm, double oracle_lse) {
  const Model& m = s.model;
  const double cap = m.softcap;
  // Attention sinks (Model::sinks): one more term of the row sum, with V = 0 and an exact logit
  // of magnitude at most the largest |sink|, folded in by one more merge.
  const bool sinks = !m.sinks.empty();
  double sink_max = 0.0;
  for (const double x : m.sinks) sink_max = std::max(sink_max, std::abs(x));
  const double keys = static_cast<double>(std::max<int64_t>(n, 1)) + (sinks ? 1.0 : 0.0);
  const double merges =
      std::max(pm.max_merges, 0) + (sinks ? 1.0 : 0.0) + (pm.split_keys > 0 ? std::ceil(keys / pm.split_keys) : 0.0);
  const double u_p = pm.p_dtype == DType::fp32 ? 0.0 : unit_roundoff(pm.p_dtype);
  const double u_out = unit_roundoff(pm.out_dtype);

  // Logits: magnitude, error and range.
  double a = m.sm_scale * qk_norm;
  if (cap > 0) a = std::min(a, cap);
  a = std::max(a, sink_max);
  // Products rounded to the cache dtype first (sglang's Triton MHA decode): sum |q_i k_i| <= N, each off
  // by at most u relative.
  const double u_qk = pm.qk_products_rounded ? unit_roundoff(s.values.dtype) : 0.0;
  const double delta = m.sm_scale * (gamma(m.head_dim + 2.0) * (1.0 + u_qk) + u_qk) * qk_norm +
                       (cap > 0 ? 6.0 * kU * cap : 0.0);
  const double range = 2.0 * a + 2.0 * delta;
  const double eps_x = 2.0 * kU * (range + a + delta);

  // Weights and sums.
  const double tiles = std::ceil(keys / std::max(pm.tile_keys, 1)) + merges;
  const double beta = std::exp(delta + (tiles + 1.0) * eps_x) * std::pow(1.0 + kExp, tiles + 1.0) - 1.0;
  const double alpha = (1.0 + beta) * (1.0 + u_p) - 1.0;
  const double g = gamma(keys + tiles + 1.0);
  const double nu = alpha + g * (1.0 + alpha);
  const double lam = pm.row_sum_rounded ? nu : beta + g * (1.0 + beta);

  // LSE of a partial, and what merging adds.
  const double magnitudes = a + delta + std::log(keys) + range + 1.0;
  const double eps_lse = -std::log1p(-lam) + 4.0 * kU * magnitudes;
  const double kappa = 2.0 * kExp + 8.0 * kU * magnitudes;

  // P below the P dtype's normal range: an absolute error per key, against a row sum >= 1 (the
  // key of the final max has p = 1), over at most n keys of |v| < v_max.
  const double v_bound = s.values.fill == Fill::signature ? ValueSource(s).signature_radix() : 2.0;
  // An fp8 V scale (Layer::v_scale; MLA: k_scale): e4m3(v / scale) * scale is off by 2^-4
  // relatively, or by half the subnormal spacing, 2^-10 scale, absolutely. Unit scales: unchanged.
  double v_max = v_bound;
  for (const Layer& l : s.model.layers) {
    const double scale = s.model.mla ? l.k_scale : l.v_scale;
    if (scale != 1.0) v_max = std::max(v_max, v_bound * (1.0 + 0x1p-4) + 0x1p-10 * scale);
  }
  const double subnormal = subnormal_error(pm.p_dtype) * (1.0 + beta) * keys * v_max / (1.0 - lam);

  // Ratio (and merges): err <= c_s S + c_o |o| + c_abs.
  double c_s = nu / (1.0 - lam), c_o = lam / (1.0 - lam), c_abs = subnormal;
  if (merges > 0) {
    const double omega = std::expm1(eps_lse + merges * kappa);
    c_s = ((nu + lam) / (1.0 - lam) + omega) / (1.0 - omega);
    c_o = omega / (1.0 - omega);
    c_abs = subnormal / (1.0 - omega);
  }
  // Divisions and merge arithmetic, then the output rounding, then the oracle's own error.
  const double g_fin = gamma(3.0 * merges + 2.0);
  Tolerance t;
  t.s_coef = (1.0 + u_out) * ((1.0 + g_fin) * c_s + g_fin) + kOracleError;
  t.o_coef = (1.0 + u_out) * (1.0 + g_fin) * c_o + u_out;
  t.abs = (1.0 + u_out) * (1.0 + g_fin) * c_abs + kOracleError;
  t.lse = eps_lse + merges * kappa + kOracleError * (1.0 + std::abs(std::isinf(oracle_lse) ? 0.0 : oracle_lse));
  // Past lam or omega = 1 the bounds above are negative or NaN: no bound (Tolerance::bounded).
  const double omega = merges > 0 ? std::expm1(eps_lse + merges * kappa) : 0.0;
  if (!(lam < 1.0 && omega < 1.0) || !std::isfinite(t.s_coef) || !std::isfinite(t.lse) || !std::isfinite(t.abs)) {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    t.s_coef = t.o_coef = t.abs = t.lse = kInf;
  }
  return t;
}

}  // namespace kvfuzz
