// How far a backend's output may be from the oracle's without a bug: a bound derived from the
// dtype and the reduction length of the executors' precision model (attention_math.h).
//
// Derivation (u = 2^-24, fp32's unit roundoff; gamma(n) = n u / (1 - n u); d = head_dim;
// n = visible keys; T = ceil(n / kTile) tiles; u_p = the dtype's unit roundoff when P is rounded
// to it, else 0; Q, K, V = bounds on |q|, |k|, |v| of the value source):
//   logit error        ds   = sm_scale (gamma(d) d Q K + u d Q K) + 2 u softcap
//   weight error       e_p  = 2 ds + 3 u + u_p + 3 u T           (exp, P rounding, per-tile rescale)
//   summation error    e_s  = gamma(kTile + 2 T)                  (within a tile, then across tiles)
//   merges (cascade, split-KV, ragged + paged): each adds 2 e_lse + 4 u; at most M of them
//   |out - oracle| <= 2 (2 e_p + 2 e_s + M (2 e_lse + 4 u)) V
//   |lse - oracle| <= 2 (2 ds + e_s + 3 u T + u |lse| + M (2 e_lse + 4 u))
// Every term is a worst-case bound of a rounding the executor performs (standard floating-point
// error analysis: Higham, Accuracy and Stability of Numerical Algorithms, ch. 3), and the factor
// 2 covers second-order terms, so a correct executor cannot exceed it: no false alarm. It is
// loose for long rows; a wrong key with softmax weight w changes the output by about w |v - o|,
// so the value check catches a single wrong key whenever w |v - o| exceeds the bound (with bf16
// and 16 visible keys, w ~ 1/16: caught), and the cache-extent property catches every wrong key
// exactly, whatever its weight.
//
//   Tolerance t = tolerance(scenario, /*visible_keys=*/n);
//   bool ok = std::abs(out - ref) <= t.out;
#pragma once

#include <cstdint>

#include "reference/scenario.h"

namespace kvfuzz {

struct Tolerance {
  double out = 0;  // absolute, per output element
  double lse = 0;  // absolute
};

Tolerance tolerance(const Scenario& s, int64_t visible_keys, double oracle_lse);

}  // namespace kvfuzz
