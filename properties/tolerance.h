// How far a backend's output may be from the oracle's without a bug: a worst-case bound per
// output element, from the executor's declared precision model and quantities the oracle computes
// alongside its result (reference/oracle.h: abs_out, qk_norm).
//
// The precision model (PrecisionModel) covers FlashAttention/FlashInfer/Triton-style GPU kernels
// as well as kvfuzz's CPU executors (backends/common/attention_math.h, cpu_precision below):
// inputs are exact in fp32 (the value source makes them so); logits s = sm_scale q.k are computed
// in fp32 in any summation order, then soft-capped; keys are taken in tiles of at least tile_keys
// with a running max (any reference value: shifts common to all keys cancel), each weight
// p = exp(s - m) evaluated in fp32 and rescaled by exp(m_old - m_new) at every later tile; p is
// rounded to p_dtype before P.V (the row sum keeps fp32 p); sums in fp32, any order; partial
// results over disjoint key sets are merged by log-sum-exp at most M = max_merges (+ ceil(n / split_keys)
// with a split_keys partition size, for n visible keys) times; the output
// is divided by the row sum in fp32 and rounded to out_dtype.
//
// Derivation (Higham, Accuracy and Stability of Numerical Algorithms, ch. 3: a sum of m terms in
// any order has error <= gamma(m) sum |terms|, gamma(m) = m u / (1 - m u); u = 2^-24). Per
// (query, head): n visible keys, exact logits s_k, weights w_k = e^(s_k) / sum_j e^(s_j), output
// o_d = sum_k w_k v_kd and S_d = sum_k w_k |v_kd| (abs_out); N = ||q|| max_k ||k|| (qk_norm).
//   logits     |s_k| <= A = sm_scale N (Cauchy-Schwarz; min(A, cap) with a soft cap)
//              |s^_k - s_k| <= delta = sm_scale gamma(d + 2) N (+ 6 u cap)   (dot, scale, cap);
//              products first rounded to the cache dtype (qk_products_rounded: sglang's Triton MHA
//              decode kernel) add u_c each: delta = sm_scale (gamma(d + 2) (1 + u_c) + u_c) N
//              every computed logit and running max lies in a range R = 2 A + 2 delta
//   exp        relative error e_exp = 8 u (covers glibc expf and the GPU ex2.approx, 2^-22);
//              its argument, a difference of two logits, is off by at most
//              eps_x = 2 u (R + A + delta) (>= u R on the CPU; >= u (R + 2 A + 2 delta) when the
//              scale is folded into exp2's argument with an FMA, FlashAttention style)
//   weights    a key's computed weight, relative to the exact e^(s_k - max) times a factor common
//              to all keys, is off by at most beta = e^(delta + (T+1) eps_x) (1 + e_exp)^(T+1) - 1,
//              T = ceil(n / tile_keys) + M tiles (its own exp and at most T rescales);
//              in the numerator also by the P rounding: alpha = (1 + beta)(1 + u_p) - 1
//   sums       numerator and row sum: gamma(n + T + 1) relative to the sums of |terms|, so
//              |N^_d - N_d| <= nu S_d L, nu = alpha + g (1 + alpha); |L^ - L| <= lam L, likewise
//              (lam = beta + g (1 + beta); = nu when the kernel sums the rounded P, row_sum_rounded:
//              FlashInfer's fa2 prefill kernels take the row sum by an MMA on P in the cache dtype)
//   ratio      |N^/L^ - N/L| = |dN - o dL| / L^ <= (nu S_d + lam |o_d|) / (1 - lam)
//   subnormal  a p rounded below p_dtype's normal range (fp8, fp16) is off by up to half the
//              subnormal spacing eta, absolutely: + eta (1 + beta) n v_max / (1 - lam), as the
//              row sum is >= 1 (the final max's key has p = 1) and |v| < v_max (2; signatures:
//              their radix)
//   merges     a partial's LSE is off by eps_lse = -ln(1 - lam) + 4 u (A + delta + ln n + R + 1);
//              a merge reweights partials by exp(lse_i - m), which adds only rounding,
//              kappa = 2 e_exp + 8 u (A + delta + ln n + R + 1), not compounding (a merged LSE
//              encodes the merged weights it used); so the partials' weights are off by
//              omega = e^(eps_lse + M kappa) - 1 and, with sum_i W_i |o_i,d| <= S_d,
//              err <= ((nu + lam) S_d / (1 - lam) + omega (S_d + |o_d|)) / (1 - omega)
//   finish     + gamma(3 M + 2) (S_d + err) (divisions, merge products and sums)
//              + u_out (|o_d| + err) (output rounding) + 1e-12 (S_d + 1) (the oracle's own error)
//   LSE        eps_lse + M kappa + 1e-12 (1 + |lse|)
//   sinks      a model's sink logit (Model::sinks) is one more term of the row sum with V = 0 and
//              an exact logit: n + 1 keys, A at least max |sink|, and one merge more (executors fold
//              it in as a merge with the state (0, sink))
// Every step is a worst-case bound, in exact exponential form (no first-order truncation), so
// an executor following the model cannot exceed it: no false alarm. It is tight where it matters:
// at head_dim 128, sm_scale 1/sqrt(128), 256 keys (S_d about 1, |o_d| about 0.125) it is about
// 8e-4 in fp32, where one wrong key is caught in 40 of 40 seeds; with P in bf16 its floor is the
// P rounding, u_p S_d = 2^-8 S_d: about 4.7e-3, 4% of a typical |o_d|, and one wrong key is caught
// in 37 of 40 seeds (properties/tests/tolerance_test.cc measures both). The old bound, from
// global constants, caught it in 1 of 20 seeds in fp32.
//
//   const PrecisionModel pm = cpu_precision(scenario);
//   const Tolerance t = tolerance(scenario, pm, n, oracle.qk_norm_at(l, q, h), oracle.lse_at(l, q, h));
//   bool ok = std::abs(out[d] - ref[d]) <= t.out(oracle.abs_out_at(l, q, h)[d], ref[d]);
#pragma once

#include <cmath>
#include <cstdint>

#include "backends/backend.h"
#include "reference/dtype.h"
#include "reference/scenario.h"

namespace kvfuzz {

// What an executor declares about its arithmetic (the model above).
struct PrecisionModel {
  DType p_dtype = DType::fp32;    // P rounded to this before P.V; fp32: not rounded
  DType out_dtype = DType::fp32;  // the output's dtype (real kernels: bf16 or fp16)
  int32_t max_merges = 0;         // LSE merges a result may pass through (split-KV, cascades)
  int32_t tile_keys = 1;          // fewest keys per softmax tile; 1 assumes nothing
  int32_t split_keys = 0;         // fewest keys per split-KV partition: one merge more per split_keys keys
  bool row_sum_rounded = false;   // the row sum adds the rounded P too (lam as nu)
  bool qk_products_rounded = false;  // each q_i k_i in the cache dtype: delta gains sm_scale u N
};

// kvfuzz's CPU executors: P in the cache dtype, fp32 output, tiles of kTile keys, and up to
// kv_splits + 4 merges (split-KV, cascade, ragged + paged).
PrecisionModel cpu_precision(const Scenario& s);

// What `backend` declares (Backend::rounding), on top of cpu_precision.
PrecisionModel precision_of(const Backend& backend, const Scenario& s);
// The same for one run of it, with what the run said of its own tiling (RunOutput::rounding).
PrecisionModel precision_of(const Backend& backend, const Scenario& s, const RunOutput& run);

struct Tolerance {
  double s_coef = 0;  // per output element: s_coef S_d + o_coef |o_d| + abs
  double o_coef = 0;
  double abs = 0;
  double lse = 0;  // absolute

  // The bound of an element with oracle output o and abs_out s.
  double out(double s, double o) const;
  // False when the derivation gives no bound: at enough keys and tiles (a `long` case against a
  // kernel that declares no tile size) the worst-case weight error reaches 1. Every bound is
  // then +inf and check_agreement says so in a note instead of passing silently.
  bool bounded() const { return std::isfinite(s_coef) && std::isfinite(lse); }
};

// n: the query's visible keys; qk_norm, lse: the oracle's for this (layer, query, head).
Tolerance tolerance(const Scenario& s, const PrecisionModel& pm, int64_t n, double qk_norm, double oracle_lse);

}  // namespace kvfuzz
