// What the model hands the attention backend for this step: q, and the new tokens' k and v.
//
// Where it sits: values -> **batch tensors** -> executors. Row t of each tensor is query token t
// of the forward batch (ForwardBatch::token_columns says which logical token); padded rows are 0.
// Production writes k/v into the cache (set_kv_buffer at out_cache_loc) before attention runs;
// Triton and FlashInfer extend also read them directly from these tensors.
//
//   BatchTensors t(scenario, batch, ValueSource(scenario));
//   const float* q = t.q(layer, token, q_head);
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "reference/forward_batch.h"
#include "reference/values.h"

namespace kvfuzz {

class BatchTensors {
 public:
  BatchTensors(const Scenario& s, const ForwardBatch& fb, const ValueSource& values);
  // Values from any function (probe runs): values(layer, tensor, request, column, head, out).
  BatchTensors(const Scenario& s, const ForwardBatch& fb,
               const std::function<void(int32_t, Tensor, int32_t, int32_t, int32_t, std::span<float>)>& values);

  const float* q(int32_t layer, int64_t token, int32_t head) const { return at(q_, layer, token, head, q_heads_, head_dim_); }
  const float* k(int32_t layer, int64_t token, int32_t head) const { return at(k_, layer, token, head, kv_heads_, head_dim_); }
  const float* v(int32_t layer, int64_t token, int32_t head) const {
    return at(v_, layer, token, head, kv_heads_, v_head_dim_);
  }
  int64_t num_tokens() const { return num_tokens_; }
  // The raw tensors: [layers][num_tokens][heads][dim].
  const std::vector<float>& q_data() const { return q_; }
  const std::vector<float>& k_data() const { return k_; }
  const std::vector<float>& v_data() const { return v_; }

 private:
  size_t offset(int32_t layer, int64_t token, int32_t head, int32_t heads, int32_t dim) const {
    return ((static_cast<size_t>(layer) * num_tokens_ + token) * heads + head) * dim;
  }
  const float* at(const std::vector<float>& t, int32_t layer, int64_t token, int32_t head, int32_t heads, int32_t dim) const {
    return t.data() + offset(layer, token, head, heads, dim);
  }

  int64_t num_tokens_;
  int32_t q_heads_, kv_heads_, head_dim_, v_head_dim_;
  std::vector<float> q_;  // [layers][num_tokens][q_heads][head_dim]
  std::vector<float> k_;  // [layers][num_tokens][kv_heads][head_dim]
  std::vector<float> v_;  // [layers][num_tokens][kv_heads][v_head_dim]
};

}  // namespace kvfuzz
