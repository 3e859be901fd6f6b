#include "backends/common/batch_tensors.h"

#include <span>

namespace kvfuzz {

BatchTensors::BatchTensors(const Scenario& s, const ForwardBatch& fb, const ValueSource& values)
    : BatchTensors(s, fb, [&values](int32_t layer, Tensor t, int32_t request, int32_t column, int32_t head,
                                    std::span<float> out) { values.fill(layer, t, request, column, head, out); }) {}

BatchTensors::BatchTensors(const Scenario& s, const ForwardBatch& fb,
                           const std::function<void(int32_t, Tensor, int32_t, int32_t, int32_t, std::span<float>)>& values)
    : num_tokens_(fb.num_tokens()),
      q_heads_(s.model.q_heads),
      kv_heads_(s.model.kv_heads),
      head_dim_(s.model.head_dim),
      v_head_dim_(s.model.v_head_dim) {
  const auto layers = static_cast<size_t>(s.model.layers.size());
  const auto n = static_cast<size_t>(num_tokens_);
  q_.assign(layers * n * q_heads_ * head_dim_, 0.0f);
  k_.assign(layers * n * kv_heads_ * head_dim_, 0.0f);
  v_.assign(layers * n * kv_heads_ * v_head_dim_, 0.0f);
  std::vector<int32_t> row_of(n, -1);
  int64_t token = 0;
  for (int32_t i = 0; i < fb.padded_bs; ++i) {
    for (int32_t j = 0; j < fb.extend_lens[static_cast<size_t>(i)]; ++j) row_of[static_cast<size_t>(token++)] = i;
  }
  for (size_t l = 0; l < layers; ++l) {
    for (size_t t = 0; t < n; ++t) {
      const int32_t column = fb.token_columns[t];
      if (column < 0) continue;  // a padded row
      const int32_t request = fb.request_ids[static_cast<size_t>(row_of[t])];
      const auto layer = static_cast<int32_t>(l);
      const auto tok = static_cast<int64_t>(t);
      auto span = [&](std::vector<float>& x, int32_t head, int32_t heads, int32_t dim) {
        return std::span<float>(x.data() + offset(layer, tok, head, heads, dim), static_cast<size_t>(dim));
      };
      for (int32_t h = 0; h < q_heads_; ++h) values(layer, Tensor::q, request, column, h, span(q_, h, q_heads_, head_dim_));
      for (int32_t h = 0; h < kv_heads_; ++h) {
        values(layer, Tensor::k, request, column, h, span(k_, h, kv_heads_, head_dim_));
        values(layer, Tensor::v, request, column, h, span(v_, h, kv_heads_, v_head_dim_));
      }
    }
  }
}

}  // namespace kvfuzz
