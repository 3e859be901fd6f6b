#include "properties/tolerance.h"

#include <cmath>

#include "backends/common/attention_math.h"
#include "reference/values.h"

namespace kvfuzz {
namespace {

constexpr double kU = 0x1p-24;

double gamma(double n) { return n * kU / (1.0 - n * kU); }

}  // namespace

Tolerance tolerance(const Scenario& s, int64_t visible_keys, double oracle_lse) {
  const Model& m = s.model;
  const bool signature = s.values.fill == Fill::signature;
  // Bounds of the value source: random values lie in (-2, 2); signatures have q = 0 and digits
  // below the radix.
  const double qk = signature ? 0.0 : 4.0;
  const double v = signature ? static_cast<double>(ValueSource(s).signature_radix()) : 2.0;
  const double d = m.head_dim;
  const double n = static_cast<double>(visible_keys);
  const double tiles = std::ceil(n / kTile);
  const double u_p = s.values.dtype == DType::fp32 ? 0.0 : unit_roundoff(s.values.dtype);
  const double merges = s.batch.kv_splits + 4.0;

  const double ds = m.sm_scale * (gamma(d) * d * qk + kU * d * qk) + 2.0 * kU * m.softcap;
  const double e_p = 2.0 * ds + 3.0 * kU + u_p + 3.0 * kU * tiles;
  const double e_s = gamma(kTile + 2.0 * tiles);
  const double e_lse = 2.0 * ds + e_s + 3.0 * kU * tiles + kU * std::abs(oracle_lse);
  const double e_merge = merges * (2.0 * e_lse + 4.0 * kU);
  return {2.0 * (2.0 * e_p + 2.0 * e_s + e_merge) * v, 2.0 * (e_lse + e_merge)};
}

}  // namespace kvfuzz
