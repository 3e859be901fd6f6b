// Generation of the model (heads, dims, layers) and the page size. Part of generate.h.
#include <algorithm>
#include <cmath>

#include "reference/generate.h"

namespace kvfuzz {
namespace {

template <class T, size_t N>
T pick(Rng& rng, const T (&options)[N], size_t limit = N) {
  return options[rng.below(std::min(limit, N))];
}

int32_t generate_dim(Rng& rng, int32_t max) {
  static constexpr int32_t kDims[] = {1, 2, 3, 4, 5, 8, 16, 32, 64, 96, 128};
  size_t n = 0;
  while (n < std::size(kDims) && kDims[n] <= max) ++n;
  return kDims[rng.below(n)];
}

Layer generate_layer(Rng& rng, int32_t page_size, int32_t max_context) {
  Layer l;
  switch (rng.below(6)) {
    case 0:
    case 1:
    case 2: l.kind = LayerKind::full; break;
    case 3:
    case 4: {
      l.kind = LayerKind::sliding_window;
      // Windows that end on, just before and just after page boundaries, and tiny ones.
      const int32_t corners[] = {0, 1, page_size - 1, page_size, page_size + 1, 2 * page_size + 1};
      l.window = rng.chance(2, 3) ? corners[rng.below(6)] : static_cast<int32_t>(rng.range(0, max_context / 2));
      l.window = std::clamp(l.window, 0, max_context);
      break;
    }
    default: {
      l.kind = LayerKind::chunked;
      const int32_t max_k = std::max<int32_t>(1, std::min<int32_t>(8, max_context / 4 / page_size));
      l.chunk = page_size * static_cast<int32_t>(rng.range(1, max_k));
      break;
    }
  }
  return l;
}

}  // namespace

int32_t generate_page_size(Rng& rng, const ProfileBounds& b) {
  // Page size 1 (sglang's FlashInfer and Triton default), powers of two, and odd sizes.
  static constexpr int32_t kSizes[] = {1, 1, 2, 3, 4, 5, 7, 8, 16, 32, 64, 128, 256};
  int32_t ps = 0;
  do ps = kSizes[rng.below(std::size(kSizes))];
  while (ps > b.max_page_size);
  return ps;
}

int32_t corner_length(Rng& rng, int32_t page_size, int32_t max) {
  int32_t len = 1;
  switch (rng.below(5)) {
    case 0: len = 1; break;
    case 1:
    case 2: {  // at a page boundary: k*ps - 1, k*ps, k*ps + 1
      const int32_t pages = static_cast<int32_t>(rng.range(1, std::max(1, max / std::max(1, page_size))));
      len = pages * page_size + static_cast<int32_t>(rng.range(-1, 1));
      break;
    }
    default: len = static_cast<int32_t>(rng.range(1, std::max(1, max)));
  }
  return std::clamp(len, 1, std::max(1, max));
}

Model generate_model(Rng rng, const ProfileBounds& b, int32_t page_size) {
  Model m;
  m.mla = rng.chance(1, 8);
  if (m.mla) {
    // One latent head: V is the first v_head_dim of K (kv_lora_rank), the rest is the rope part.
    m.kv_heads = 1;
    m.q_heads = 1 << rng.below(3);
    m.v_head_dim = std::max(1, generate_dim(rng, b.max_head_dim));
    m.head_dim = m.v_head_dim + std::max(1, m.v_head_dim / 8 * static_cast<int32_t>(rng.range(0, 1)));
  } else {
    m.kv_heads = 1 << rng.below(3);
    while (m.kv_heads > b.max_q_heads) m.kv_heads /= 2;
    int32_t group = 1 << rng.below(4);
    while (m.kv_heads * group > b.max_q_heads) group /= 2;
    m.q_heads = m.kv_heads * group;
    m.head_dim = generate_dim(rng, b.max_head_dim);
    m.v_head_dim = rng.chance(3, 4) ? m.head_dim : generate_dim(rng, b.max_head_dim);
  }
  // sqrt and division are correctly rounded in IEEE arithmetic: the same double everywhere.
  const double scales[] = {1.0 / std::sqrt(static_cast<double>(m.head_dim)), 0.125, 1.0};
  m.sm_scale = scales[rng.below(3)];
  static constexpr double kCaps[] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0, 30.0, 50.0};
  m.softcap = pick(rng, kCaps);
  const auto layers = static_cast<int32_t>(rng.range(1, b.max_layers));
  for (int32_t i = 0; i < layers; ++i) m.layers.push_back(generate_layer(rng, page_size, b.max_context_len));
  return m;
}

Model generate_gpt_oss_model(Rng rng, const ProfileBounds& b, int32_t page_size) {
  Model m;
  m.kv_heads = 1 << rng.below(2);
  while (m.kv_heads * 8 > b.max_q_heads && m.kv_heads > 1) m.kv_heads /= 2;
  m.q_heads = std::min(m.kv_heads * 8, b.max_q_heads);
  static constexpr int32_t kDims[] = {8, 16, 32, 64};  // gpt-oss: 64
  do m.head_dim = pick(rng, kDims);
  while (m.head_dim > b.max_head_dim);
  m.v_head_dim = m.head_dim;
  m.sm_scale = 1.0 / std::sqrt(static_cast<double>(m.head_dim));
  // gpt-oss alternates banded (sliding_window 128: W = 127) and full layers, one window for every
  // banded layer; here one of the generator's corners at this page size.
  const int32_t corners[] = {1, page_size - 1, page_size, page_size + 1, 2 * page_size + 1, 127};
  const int32_t window = std::clamp(corners[rng.below(6)], 0, b.max_context_len);
  const auto layers = static_cast<int32_t>(rng.range(2, std::max(2, b.max_layers)));
  for (int32_t i = 0; i < layers; ++i) {
    Layer l;
    if (i % 2 == 0) {
      l.kind = LayerKind::sliding_window;
      l.window = window;
    }
    m.layers.push_back(l);
  }
  // Sinks around the logits' own scale (|q.k| sm_scale is a few units here), now and then one
  // that dominates (+6) or vanishes (-6).
  for (int32_t h = 0; h < m.q_heads; ++h)
    m.sinks.push_back(rng.chance(1, 8) ? (rng.chance(1, 2) ? 6.0 : -6.0)
                                       : static_cast<double>(rng.range(-24, 24)) / 8.0);
  return m;
}

void generate_kv_scales(Rng rng, Model& m) {
  for (Layer& l : m.layers)
    for (float* scale : {&l.k_scale, &l.v_scale}) {
      if (rng.chance(1, 4) || (m.mla && scale == &l.v_scale)) continue;  // MLA: the latent's one scale
      const auto mantissa = static_cast<float>(8 + rng.below(8));
      *scale = std::ldexp(mantissa / 8.0f, static_cast<int>(rng.below(11)) - 8);
    }
}

}  // namespace kvfuzz
