// One vector of doubles for the build's ISA: the vocabulary of the oracle's kernels.
//
// Where it sits: under the oracle's attention kernel (oracle_tiles.h, oracle_exp.h) and the
// bench's peak loop (oracle_bench.cc). Kernels are written once against `vd` and `kLanes`; this
// header maps them to AVX-512, AVX2+FMA or a portable two-lane fallback. Every operation is plain
// IEEE arithmetic (fma is fused, nothing is reassociated), so results depend on the ISA's lane
// count but never on the thread count.
//
//   simd::vd acc = simd::splat(0.0);
//   acc = simd::fma(simd::load(q + d), simd::load(k_row + d), acc);  // k_row: float or double
//   double dot = simd::hsum(acc);
#pragma once

#include <cmath>
#include <cstring>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
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

namespace kvfuzz::simd {

#if defined(__AVX512F__)

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

#elif defined(__AVX2__) && defined(__FMA__)

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

// Sum of the lanes as a balanced tree in a fixed order.
inline double hsum(vd v) {
  double a[kLanes];
  std::memcpy(a, &v, sizeof v);
  for (int w = kLanes / 2; w >= 1; w /= 2)
    for (int i = 0; i < w; ++i) a[i] += a[i + w];
  return a[0];
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

}  // namespace kvfuzz::simd
