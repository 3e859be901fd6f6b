// e^x for x <= 0, a vector at a time, within about 1 ulp: the softmax weights of the oracle.
//
// Where it sits: inside the oracle's online softmax (oracle_kernel.cc), which only ever takes
// e^(s - max) <= 1 and e^(old max - new max) <= 1. Arguments below -746 (and -inf, a masked
// logit) give exactly 0; e^0 is exactly 1.
//
// Method: x = k ln2 + r with k = round(x / ln2) and |r| <= ln2/2 (Cody-Waite: k * ln2_hi is exact,
// so r carries no cancellation error), e^r by its Taylor series to degree 13 (truncation below
// 0.1 ulp) in Horner form with fused multiply-adds, then an exact scaling by 2^k that rounds once
// where the result is subnormal. The same operations on every ISA give the same bits.
//
// Compiled once per ISA (oracle_target.h); OracleKernels::exp_nonpositive (oracle_dispatch.h) is
// the scalar form of the ISA in use.
//
//   simd::vd p = exp_nonpositive(simd::load(s) - simd::splat(row_max));
#pragma once

#include "reference/oracle_simd.h"

KVFUZZ_ORACLE_BEGIN

namespace kvfuzz::KVFUZZ_ORACLE_NS {

inline simd::vd exp_nonpositive(simd::vd x) {
  using namespace simd;
  constexpr double kLog2e = 1.44269504088896338700e+00;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;  // 33 significant bits
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  // 1/n! for n = 13 .. 2.
  constexpr double kInvFact[] = {
      1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
      1.0 / 362880.0,     1.0 / 40320.0,     1.0 / 5040.0,     1.0 / 720.0,
      1.0 / 120.0,        1.0 / 24.0,        1.0 / 6.0,        1.0 / 2.0,
  };
  x = max(x, splat(-746.0));
  const vd k = round_nearest(x * splat(kLog2e));
  vd r = fma(k, splat(-kLn2Hi), x);  // exact
  r = fma(k, splat(-kLn2Lo), r);
  vd p = splat(kInvFact[0]);
  for (int i = 1; i < 12; ++i) p = fma(p, r, splat(kInvFact[i]));
  p = fma(p, r, splat(1.0));
  p = fma(p, r, splat(1.0));
  return scale_pow2(p, k);
}

inline double exp_nonpositive(double x) { return simd::lane(exp_nonpositive(simd::splat(x)), 0); }

}  // namespace kvfuzz::KVFUZZ_ORACLE_NS

KVFUZZ_ORACLE_END
