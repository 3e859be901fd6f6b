// One vector of doubles for the ISA being compiled: the vocabulary of the oracle's kernels.
//
// Where it sits: under the oracle's per-ISA kernels (oracle_tiles.h, oracle_exp.h,
// oracle_isa_kernels.cc), compiled once per ISA (oracle_target.h). Kernels are written once
// against `vd` and `kLanes`; this header maps them to AVX-512, AVX2+FMA or a portable two-lane
// fallback. Every operation is plain IEEE arithmetic (fma is fused, nothing is reassociated or
// contracted), and a sum across lanes runs over kOracleLanes lanes (`vw`: kOracleLanes / kLanes
// vectors) folded as one tree, so every ISA gives the same bits, for every thread count.
//
//   simd::vw acc = simd::wide_splat(0.0);
//   acc = simd::wide_fma(simd::wide_load(q + d), simd::wide_load(k_row + d), acc);  // k_row: float or double
//   double dot = simd::wide_hsum(acc);
#pragma once

#include <cmath>
#include <cstring>

#include "reference/oracle_dispatch.h"
#include "reference/oracle_target.h"

#if KVFUZZ_ORACLE_ISA_ID > 0
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns inside its own AVX-512 intrinsics (_mm512_undefined_pd), wherever they inline.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif
#endif

KVFUZZ_ORACLE_BEGIN
namespace kvfuzz::KVFUZZ_ORACLE_NS::simd {

#if KVFUZZ_ORACLE_ISA_ID == 2

inline constexpr int kLanes = 8;
inline constexpr const char* kIsa = "AVX-512 (8 doubles per vector)";
using vd = __m512d;
inline vd splat(double x) { return _mm512_set1_pd(x); }
inline vd load(const double* p) { return _mm512_loadu_pd(p); }
inline vd load(const float* p) { return _mm512_cvtps_pd(_mm256_loadu_ps(p)); }
inline void store(double* p, vd v) { _mm512_storeu_pd(p, v); }
inline vd fma(vd a, vd b, vd c) { return _mm512_fmadd_pd(a, b, c); }
inline vd max(vd a, vd b) { return _mm512_max_pd(a, b); }
inline vd abs(vd a) { return _mm512_abs_pd(a); }
inline vd round_nearest(vd x) { return _mm512_roundscale_pd(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
// p * 2^k for integral k >= -1100, rounded once (to a subnormal or 0 where it must).
inline vd scale_pow2(vd p, vd k) { return _mm512_scalef_pd(p, k); }

#elif KVFUZZ_ORACLE_ISA_ID == 1

inline constexpr int kLanes = 4;
inline constexpr const char* kIsa = "AVX2+FMA (4 doubles per vector)";
using vd = __m256d;
inline vd splat(double x) { return _mm256_set1_pd(x); }
inline vd load(const double* p) { return _mm256_loadu_pd(p); }
inline vd load(const float* p) { return _mm256_cvtps_pd(_mm_loadu_ps(p)); }
inline void store(double* p, vd v) { _mm256_storeu_pd(p, v); }
inline vd fma(vd a, vd b, vd c) { return _mm256_fmadd_pd(a, b, c); }
inline vd max(vd a, vd b) { return _mm256_max_pd(a, b); }
inline vd abs(vd a) { return _mm256_andnot_pd(_mm256_set1_pd(-0.0), a); }
inline vd round_nearest(vd x) { return _mm256_round_pd(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
// p * 2^k1 * 2^k2 with k1 + k2 = k and both factors normal: the first product is exact, the
// second rounds once.
inline vd scale_pow2(vd p, vd k) {
  const __m128i ki = _mm256_cvtpd_epi32(k);
  const __m128i k1 = _mm_srai_epi32(ki, 1), k2 = _mm_sub_epi32(ki, k1);
  const __m256i bias = _mm256_set1_epi64x(1023);
  const __m256d f1 = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(k1), bias), 52));
  const __m256d f2 = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(k2), bias), 52));
  return p * f1 * f2;
}

#else

inline constexpr int kLanes = 2;
inline constexpr const char* kIsa = "portable (2 doubles per vector)";
typedef double vd __attribute__((vector_size(16)));
inline vd splat(double x) { return vd{x, x}; }
inline vd load(const double* p) { return vd{p[0], p[1]}; }
inline vd load(const float* p) { return vd{p[0], p[1]}; }
inline void store(double* p, vd v) { std::memcpy(p, &v, sizeof v); }
inline vd fma(vd a, vd b, vd c) { return vd{std::fma(a[0], b[0], c[0]), std::fma(a[1], b[1], c[1])}; }
inline vd max(vd a, vd b) { return vd{a[0] > b[0] ? a[0] : b[0], a[1] > b[1] ? a[1] : b[1]}; }
inline vd abs(vd a) { return vd{std::abs(a[0]), std::abs(a[1])}; }
inline vd round_nearest(vd x) { return vd{std::nearbyint(x[0]), std::nearbyint(x[1])}; }
inline vd scale_pow2(vd p, vd k) {
  return vd{std::ldexp(p[0], static_cast<int>(k[0])), std::ldexp(p[1], static_cast<int>(k[1]))};
}

#endif

// Lane i of v.
inline double lane(vd v, int i) {
  double a[kLanes];
  std::memcpy(a, &v, sizeof v);
  return a[i];
}

inline double hmax(vd v) {
  double a[kLanes];
  std::memcpy(a, &v, sizeof v);
  double m = a[0];
  for (int i = 1; i < kLanes; ++i) m = a[i] > m ? a[i] : m;
  return m;
}

// n rounded up to a whole number of vectors.
constexpr int round_up_lanes(int n) { return (n + kLanes - 1) / kLanes * kLanes; }

// ------------------------------------------------------------------------- sums across lanes --

// kOracleLanes doubles as kParts vectors: lane l is lane l % kLanes of part l / kLanes.
inline constexpr int kParts = kOracleLanes / kLanes;
static_assert(kParts * kLanes == kOracleLanes);
struct vw {
  vd part[kParts];
};

inline vw wide_splat(double x) {
  vw r;
  for (int h = 0; h < kParts; ++h) r.part[h] = splat(x);
  return r;
}
template <typename T>  // double or float
inline vw wide_load(const T* p) {
  vw r;
  for (int h = 0; h < kParts; ++h) r.part[h] = load(p + h * kLanes);
  return r;
}
inline vw wide_fma(vw a, vw b, vw c) {
  for (int h = 0; h < kParts; ++h) c.part[h] = fma(a.part[h], b.part[h], c.part[h]);
  return c;
}

// Sum of the kOracleLanes lanes as a balanced tree in a fixed order.
inline double wide_hsum(vw v) {
  double a[kOracleLanes];
  std::memcpy(a, v.part, sizeof a);
  for (int w = kOracleLanes / 2; w >= 1; w /= 2)
    for (int i = 0; i < w; ++i) a[i] += a[i + w];
  return a[0];
}

}  // namespace kvfuzz::KVFUZZ_ORACLE_NS::simd

KVFUZZ_ORACLE_END
