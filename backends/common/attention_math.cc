#include "backends/common/attention_math.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvfuzz {

float logit(const float* q, const float* k, int32_t head_dim, float sm_scale, float softcap) {
  float dot = 0.0f;
  for (int32_t d = 0; d < head_dim; ++d) dot += q[d] * k[d];
  float s = dot * sm_scale;
  if (softcap > 0.0f) s = softcap * std::tanh(s / softcap);
  return s;
}

SoftmaxAccumulator::SoftmaxAccumulator(int32_t v_head_dim, DType dtype)
    : vd_(v_head_dim),
      dtype_(dtype),
      m_(-std::numeric_limits<float>::infinity()),
      l_(0.0f),
      acc_(static_cast<size_t>(v_head_dim), 0.0f),
      tile_acc_(static_cast<size_t>(v_head_dim), 0.0f),
      tile_s_(kTile),
      tile_v_(kTile) {}

void SoftmaxAccumulator::reset() {
  m_ = -std::numeric_limits<float>::infinity();
  l_ = 0.0f;
  std::fill(acc_.begin(), acc_.end(), 0.0f);
  in_tile_ = 0;
  keys_ = 0;
}

void SoftmaxAccumulator::add(float s, const float* v) {
  tile_s_[static_cast<size_t>(in_tile_)] = s;
  tile_v_[static_cast<size_t>(in_tile_)] = v;
  ++keys_;
  if (++in_tile_ == kTile) flush();
}

void SoftmaxAccumulator::flush() {
  if (in_tile_ == 0) return;
  float m_new = m_;
  for (int32_t i = 0; i < in_tile_; ++i) m_new = std::max(m_new, tile_s_[static_cast<size_t>(i)]);
  // Rescale what came before to the new max (m_ = -inf: nothing came before).
  const float scale = m_ == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(m_ - m_new);
  float tile_l = 0.0f;
  std::fill(tile_acc_.begin(), tile_acc_.end(), 0.0f);
  for (int32_t i = 0; i < in_tile_; ++i) {
    const float p = std::exp(tile_s_[static_cast<size_t>(i)] - m_new);
    tile_l += p;
    const float pr = round_to(dtype_, p);  // P in the cache dtype for the P*V product
    const float* v = tile_v_[static_cast<size_t>(i)];
    for (int32_t d = 0; d < vd_; ++d) tile_acc_[static_cast<size_t>(d)] += pr * v[d];
  }
  for (int32_t d = 0; d < vd_; ++d) acc_[static_cast<size_t>(d)] = acc_[static_cast<size_t>(d)] * scale + tile_acc_[static_cast<size_t>(d)];
  l_ = l_ * scale + tile_l;
  m_ = m_new;
  in_tile_ = 0;
}

void SoftmaxAccumulator::finish(float* out, float* lse) {
  flush();
  if (keys_ == 0) {
    std::fill(out, out + vd_, 0.0f);
    *lse = -std::numeric_limits<float>::infinity();
    return;
  }
  for (int32_t d = 0; d < vd_; ++d) out[d] = acc_[static_cast<size_t>(d)] / l_;
  *lse = m_ + std::log(l_);
}

void merge_states(const float* out_a, float lse_a, const float* out_b, float lse_b, int32_t v_head_dim, float* out,
                  float* lse) {
  const float inf = std::numeric_limits<float>::infinity();
  if (lse_a == -inf && lse_b == -inf) {
    std::fill(out, out + v_head_dim, 0.0f);
    *lse = -inf;
    return;
  }
  const float m = std::max(lse_a, lse_b);
  const float wa = lse_a == -inf ? 0.0f : std::exp(lse_a - m);
  const float wb = lse_b == -inf ? 0.0f : std::exp(lse_b - m);
  const float total = wa + wb;
  for (int32_t d = 0; d < v_head_dim; ++d) out[d] = (out_a[d] * wa + out_b[d] * wb) / total;
  *lse = m + std::log(total);
}

void fold_sink(float* out, float* lse, float sink, int32_t v_head_dim) {
  const float inf = std::numeric_limits<float>::infinity();
  if (*lse == -inf) {
    std::fill(out, out + v_head_dim, 0.0f);
    *lse = sink;
    return;
  }
  const float m = std::max(*lse, sink);
  const float w = std::exp(*lse - m), ws = std::exp(sink - m);
  const float total = w + ws;
  for (int32_t d = 0; d < v_head_dim; ++d) out[d] = out[d] * w / total;
  *lse = m + std::log(total);
}

}  // namespace kvfuzz
