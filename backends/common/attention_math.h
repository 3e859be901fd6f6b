// The arithmetic every CPU executor shares: softmax attention over a stream of keys the way a
// GPU kernel does it, and the log-sum-exp merge of partial results.
//
// Where it sits: executors decide which keys a query reads (that is where metadata bugs live);
// this file decides how the numbers are combined, once, for all of them. The precision model is
// that of FlashAttention/FlashInfer kernels: logits and softmax statistics in fp32, keys taken in
// tiles of kTile with the running max updated per tile, the probabilities P rounded to the cache
// dtype before the P*V product (fp32 caches keep P in fp32), accumulation in fp32. The agreement
// bound (properties/tolerance.h) is derived from exactly this model.
//
//   SoftmaxAccumulator acc(v_head_dim, dtype);
//   for (key in keys) acc.add(logit(q, k), v);
//   acc.finish(out, &lse);             // out[v_head_dim], lse natural log; -inf when no key
//   merge_states(o_a, lse_a, o_b, lse_b, v_head_dim, o, &lse);   // sglang merge_state
//   fold_sink(o, &lse, sink, v_head_dim);   // an attention sink joins a finished result, once
#pragma once

#include <cstdint>
#include <vector>

#include "reference/dtype.h"
#include "reference/scenario.h"

namespace kvfuzz {

inline constexpr int kTile = 64;

// sm_scale * q.k in fp32, then the soft cap.
float logit(const float* q, const float* k, int32_t head_dim, float sm_scale, float softcap);

class SoftmaxAccumulator {
 public:
  SoftmaxAccumulator(int32_t v_head_dim, DType dtype);
  void reset();                           // ready for the next (query, head)
  void add(float logit, const float* v);  // v: [v_head_dim]
  // out: [v_head_dim]; a query that saw no key gets 0 and lse = -inf.
  void finish(float* out, float* lse);
  int64_t keys() const { return keys_; }

 private:
  void flush();

  int32_t vd_;
  DType dtype_;
  float m_, l_;
  std::vector<float> acc_;                          // [v_head_dim]
  std::vector<float> tile_acc_;                     // [v_head_dim]
  std::vector<float> tile_s_;                       // [kTile]
  std::vector<const float*> tile_v_;                // [kTile]
  int32_t in_tile_ = 0;
  int64_t keys_ = 0;
};

// Combines two normalized partial results over disjoint key sets: weights exp(lse_x - lse).
// Either side may be empty (lse -inf). out may alias a.
void merge_states(const float* out_a, float lse_a, const float* out_b, float lse_b, int32_t v_head_dim, float* out,
                  float* lse);

// An attention sink (Model::sinks) joins a normalized result: a merge with the state (output 0,
// LSE = sink), which puts e^sink into the denominator only. A result that saw no key becomes
// (0, sink). Applied once per (query, head): applied per split or cascade part it counts twice.
void fold_sink(float* out, float* lse, float sink, int32_t v_head_dim);

}  // namespace kvfuzz
