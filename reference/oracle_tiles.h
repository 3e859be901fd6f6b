// Register tiles of the oracle's attention kernel: S = Q K^T and O += P V on one key block.
//
// Where it sits: inside attend_unit (oracle_kernel.cc), which calls these once per key block of
// a work unit. Two forms of S, chosen by the unit's row count M (queries x q heads of a group):
// - packed (M large: prefill, extend): Q is packed into panels of kQkRows rows and K^T into panels
//   of kQkKeys keys, both in double; the tile broadcasts one Q value and multiply-adds it across
//   kQkVecs vectors of keys, GEMM style, with every accumulator in a register.
// - dot (M small: decode, verify): each S value is a dot product of a Q row with a K row read
//   straight from the materialised floats, so a memory-bound decode reads K once.
// O += P V broadcasts one P value and multiply-adds it across vectors of V's row, for V in double
// (packed) or float (read in place), and the same with |V| when asked. Each output element is
// summed in a fixed order.
//
//   pack_kt(k_rows, nb, nbp, dp, kt);
//   qk_packed(q_panels, kt, m, nbp, dp, s, kKeyBlock);    // or qk_dot(...) for few rows
//   pv(s, kKeyBlock, m, nb, v_rows, dvp, o);
//
// Compiled once per ISA (oracle_target.h): tile shapes follow the ISA's vector width, results do
// not (each S and O element is a chain of fused multiply-adds in a fixed order; a dot product's
// sum across lanes is simd::wide_hsum's).
#pragma once

#include <algorithm>

#include "reference/oracle_scratch.h"
#include "reference/oracle_simd.h"

KVFUZZ_ORACLE_BEGIN

namespace kvfuzz::KVFUZZ_ORACLE_NS::tiles {

using simd::kLanes;
using simd::vd;
using simd::vw;

inline constexpr int kQkRows = kLanes == 8 ? 8 : kLanes == 4 ? 4 : 2;
inline constexpr int kQkVecs = 2;
inline constexpr int kQkKeys = kQkVecs * kLanes;  // keys per K^T panel
// Keys of a block rounded up to whole K^T panels and whole sums across lanes.
inline constexpr int kKeyAlign = kQkKeys > kOracleLanes ? kQkKeys : kOracleLanes;
inline constexpr int kDotKeys = kLanes == 8 ? 4 : 2;  // keys per dot-form tile
inline constexpr int kPvRows = 4;
inline constexpr int kPvVecs = kLanes == 8 ? 4 : 2;
static_assert(kOracleScratchRows % kQkRows == 0 && kKeyBlock % kKeyAlign == 0);

// ----------------------------------------------------------------------------- packing --

// rows[i] -> out[i / kQkRows][d][i % kQkRows]; rows past m (up to a whole panel) are zero.
// rows: m pointers to dp floats.
inline void pack_q_panels(const float* const* rows, int m, int dp, double* out) {
  const int panels = (m + kQkRows - 1) / kQkRows;
  for (int p = 0; p < panels; ++p)
    for (int r = 0; r < kQkRows; ++r) {
      const int i = p * kQkRows + r;
      double* o = out + static_cast<size_t>(p) * dp * kQkRows + r;
      for (int d = 0; d < dp; ++d) o[d * kQkRows] = i < m ? rows[i][d] : 0.0;
    }
}

// rows[i] -> out[i][d], in double.
inline void pack_q_rows(const float* const* rows, int m, int dp, double* out) {
  for (int i = 0; i < m; ++i)
    for (int d = 0; d < dp; ++d) out[static_cast<size_t>(i) * dp + d] = rows[i][d];
}

// k: [nb][dp] floats -> out: [nbp / kQkKeys][dp][kQkKeys] doubles, keys past nb zero.
inline void pack_kt(const float* k, int nb, int nbp, int dp, double* out) {
  for (int j = 0; j < nbp; ++j) {
    double* o = out + static_cast<size_t>(j / kQkKeys) * dp * kQkKeys + j % kQkKeys;
    const float* src = k + static_cast<size_t>(j) * dp;
    if (j < nb)
      for (int d = 0; d < dp; ++d) o[d * kQkKeys] = src[d];
    else
      for (int d = 0; d < dp; ++d) o[d * kQkKeys] = 0.0;
  }
}

// v: [nb][dvp] floats -> out: [nb][dvp] doubles.
inline void pack_v(const float* v, int nb, int dvp, double* out) {
  const size_t n = static_cast<size_t>(nb) * dvp;
  for (size_t i = 0; i < n; i += kLanes) simd::store(out + i, simd::load(v + i));
}

// --------------------------------------------------------------------------------- S = QK^T --

// s[i][j] = sum_d q[d][i] * kt[d][j] for MR rows and MR x NR vectors of keys.
// q: [dp][MR], kt: [dp][NR * kLanes], s: rows of stride lds.
template <int MR, int NR>
inline void qk_tile(const double* q, const double* kt, int dp, double* s, int lds) {
  vd acc[MR][NR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int r = 0; r < NR; ++r) acc[i][r] = simd::splat(0.0);
  for (int d = 0; d < dp; ++d) {
    vd b[NR];
#pragma GCC unroll 16
    for (int r = 0; r < NR; ++r) b[r] = simd::load(kt + d * NR * kLanes + r * kLanes);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const vd a = simd::splat(q[d * MR + i]);
#pragma GCC unroll 16
      for (int r = 0; r < NR; ++r) acc[i][r] = simd::fma(a, b[r], acc[i][r]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int r = 0; r < NR; ++r) simd::store(s + i * lds + r * kLanes, acc[i][r]);
}

// s: [round up m to kQkRows][lds] = Q K^T over nbp keys. q_panels from pack_q_panels, kt from pack_kt.
inline void qk_packed(const double* q_panels, const double* kt, int m, int nbp, int dp, double* s, int lds) {
  const int row_panels = (m + kQkRows - 1) / kQkRows;
  for (int kp = 0; kp < nbp / kQkKeys; ++kp) {
    const double* b = kt + static_cast<size_t>(kp) * dp * kQkKeys;
    for (int rp = 0; rp < row_panels; ++rp)
      qk_tile<kQkRows, kQkVecs>(q_panels + static_cast<size_t>(rp) * dp * kQkRows, b, dp,
                                s + static_cast<size_t>(rp) * kQkRows * lds + kp * kQkKeys, lds);
  }
}

// s[t] = q . k[t] for NK keys; q: [dp] doubles, k: NK rows of dp floats, stride ldk. With kNorm,
// also *norm2 = max(*norm2, ||k[t]||^2) from the same loads.
// dp is a multiple of kOracleLanes.
template <int NK, bool kNorm = false>
inline void qk_dot_tile(const double* q, const float* k, int ldk, int dp, double* s, double* norm2 = nullptr) {
  vw acc[NK], nacc[kNorm ? NK : 1];
#pragma GCC unroll 8
  for (int t = 0; t < NK; ++t) acc[t] = simd::wide_splat(0.0);
  if constexpr (kNorm)
    for (int t = 0; t < NK; ++t) nacc[t] = simd::wide_splat(0.0);
  for (int d = 0; d < dp; d += kOracleLanes) {
    const vw a = simd::wide_load(q + d);
#pragma GCC unroll 8
    for (int t = 0; t < NK; ++t) {
      const vw b = simd::wide_load(k + t * ldk + d);
      acc[t] = simd::wide_fma(a, b, acc[t]);
      if constexpr (kNorm) nacc[t] = simd::wide_fma(b, b, nacc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < NK; ++t) s[t] = simd::wide_hsum(acc[t]);
  if constexpr (kNorm)
    for (int t = 0; t < NK; ++t) *norm2 = std::max(*norm2, simd::wide_hsum(nacc[t]));
}

// s: [m][lds] = Q K^T over nb keys. q: [m][dp] doubles, k: [k_avail >= nb][dp] floats;
// *norm2 = max(*norm2, the largest ||k||^2), taken with row 0's products.
// A decode reads each K and V row once, from memory: while it walks K it prefetches K
// kPrefetchKeys rows ahead into L1 and this block's V rows (v: [nb][dvp] floats) into L2, so both
// streams stay in flight and the O += PV step that follows reads V from cache.
inline void qk_dot(const double* q, const float* k, int k_avail, int m, int nb, int dp, double* s, int lds,
                   const float* v, int dvp, double* norm2) {
  constexpr int kKeys = kDotKeys, kPrefetchKeys = 8;
  constexpr int kFloatsPerLine = 16;
  int j = 0;
  for (; j + kKeys <= nb; j += kKeys) {
    if (j + kPrefetchKeys + kKeys <= k_avail)
      for (int t = 0; t < kKeys * dp; t += kFloatsPerLine)
        __builtin_prefetch(k + static_cast<size_t>(j + kPrefetchKeys) * dp + t, 0, 3);
    for (int t = 0; t < kKeys * dvp; t += kFloatsPerLine) __builtin_prefetch(v + static_cast<size_t>(j) * dvp + t, 0, 2);
    qk_dot_tile<kKeys, true>(q, k + static_cast<size_t>(j) * dp, dp, dp, s + j, norm2);
    for (int i = 1; i < m; ++i)
      qk_dot_tile<kKeys>(q + static_cast<size_t>(i) * dp, k + static_cast<size_t>(j) * dp, dp, dp,
                         s + static_cast<size_t>(i) * lds + j);
  }
  for (; j < nb; ++j) {
    qk_dot_tile<1, true>(q, k + static_cast<size_t>(j) * dp, dp, dp, s + j, norm2);
    for (int i = 1; i < m; ++i)
      qk_dot_tile<1>(q + static_cast<size_t>(i) * dp, k + static_cast<size_t>(j) * dp, dp, dp,
                     s + static_cast<size_t>(i) * lds + j);
  }
}

// The largest ||k||^2 of nb rows of dp floats (zero padded, dp a multiple of kOracleLanes), each
// summed in double in a fixed order.
inline double max_norm2(const float* k, int nb, int dp) {
  double best = 0.0;
  for (int j = 0; j < nb; ++j) {
    vw acc = simd::wide_splat(0.0);
    for (int d = 0; d < dp; d += kOracleLanes) {
      const vw x = simd::wide_load(k + static_cast<size_t>(j) * dp + d);
      acc = simd::wide_fma(x, x, acc);
    }
    best = std::max(best, simd::wide_hsum(acc));
  }
  return best;
}

// ---------------------------------------------------------------------------------- O += PV --

// o[i][c .. c + NV * kLanes) += sum_j p[i][j] * v[j][c ..] for MR rows, keys j in [0, nb), and
// with kAbs also oa[i][c ..] += sum_j p[i][j] * |v[j][c ..]| from the same loads.
// p: rows of stride ldp, v: rows of stride ldv (double or float), o and oa: rows of stride ldo.
template <int MR, int NV, bool kAbs, typename T>
inline void pv_tile(const double* p, int ldp, const T* v, int ldv, int nb, double* o, double* oa, int ldo) {
  vd acc[MR][NV], acca[kAbs ? MR : 1][kAbs ? NV : 1];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int r = 0; r < NV; ++r) {
      acc[i][r] = simd::load(o + i * ldo + r * kLanes);
      if constexpr (kAbs) acca[i][r] = simd::load(oa + i * ldo + r * kLanes);
    }
  for (int j = 0; j < nb; ++j) {
    vd b[NV], ba[kAbs ? NV : 1];
#pragma GCC unroll 16
    for (int r = 0; r < NV; ++r) {
      b[r] = simd::load(v + static_cast<size_t>(j) * ldv + r * kLanes);
      if constexpr (kAbs) ba[r] = simd::abs(b[r]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const vd a = simd::splat(p[i * ldp + j]);
#pragma GCC unroll 16
      for (int r = 0; r < NV; ++r) {
        acc[i][r] = simd::fma(a, b[r], acc[i][r]);
        if constexpr (kAbs) acca[i][r] = simd::fma(a, ba[r], acca[i][r]);
      }
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int r = 0; r < NV; ++r) {
      simd::store(o + i * ldo + r * kLanes, acc[i][r]);
      if constexpr (kAbs) simd::store(oa + i * ldo + r * kLanes, acca[i][r]);
    }
}

// MR rows across all dvp columns: chunks of NV vectors, then single vectors.
template <int MR, int NV, bool kAbs, typename T>
inline void pv_rows(const double* p, int ldp, const T* v, int nb, int dvp, double* o, double* oa) {
  int c = 0;
  for (; c + NV * kLanes <= dvp; c += NV * kLanes)
    pv_tile<MR, NV, kAbs>(p, ldp, v + c, dvp, nb, o + c, kAbs ? oa + c : nullptr, dvp);
  for (; c < dvp; c += kLanes) pv_tile<MR, 1, kAbs>(p, ldp, v + c, dvp, nb, o + c, kAbs ? oa + c : nullptr, dvp);
}

// o: [m][dvp] += p: [m][ldp] (keys [0, nb)) times v: [nb][dvp]; when oa is not null, also
// oa: [m][dvp] += p times |v| (half as many vectors per tile: twice the accumulators).
template <typename T>
inline void pv(const double* p, int ldp, int m, int nb, const T* v, int dvp, double* o, double* oa = nullptr) {
  constexpr int kAbsVecs = kPvVecs / 2 > 0 ? kPvVecs / 2 : 1;
  int i = 0;
  for (; i + kPvRows <= m; i += kPvRows) {
    const size_t at = static_cast<size_t>(i) * dvp;
    if (oa != nullptr) pv_rows<kPvRows, kAbsVecs, true>(p + static_cast<size_t>(i) * ldp, ldp, v, nb, dvp, o + at, oa + at);
    else pv_rows<kPvRows, kPvVecs, false>(p + static_cast<size_t>(i) * ldp, ldp, v, nb, dvp, o + at, nullptr);
  }
  for (; i < m; ++i) {
    const size_t at = static_cast<size_t>(i) * dvp;
    if (oa != nullptr) pv_rows<1, kPvVecs, true>(p + static_cast<size_t>(i) * ldp, ldp, v, nb, dvp, o + at, oa + at);
    else pv_rows<1, 4 * kPvVecs, false>(p + static_cast<size_t>(i) * ldp, ldp, v, nb, dvp, o + at, nullptr);
  }
}

}  // namespace kvfuzz::KVFUZZ_ORACLE_NS::tiles

KVFUZZ_ORACLE_END
