#include "backends/common/kv_pools.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvfuzz {

std::string to_string(PoolKind k) { return k == PoolKind::full ? "full" : "SWA"; }

PoolKind pool_of(const Scenario& s, int32_t layer) {
  const bool swa = s.model.layers[static_cast<size_t>(layer)].kind == LayerKind::sliding_window && s.cache.swa_pages > 0;
  return swa ? PoolKind::swa : PoolKind::full;
}

void KvPool::write(int64_t slot, int32_t head, const float* k, const float* v, const Where& where) {
  check(slot, where);
  float* kd = k_row_for_write(slot) + int64_t{head} * head_dim;
  for (int32_t d = 0; d < head_dim; ++d) kd[d] = k[d];
  if (mla) return;  // V is a view of K
  float* vd = v_row_for_write(slot) + int64_t{head} * v_head_dim;
  for (int32_t d = 0; d < v_head_dim; ++d) vd[d] = v[d];
}

float* KvPool::row_for_write(Blocks& blocks, const std::vector<float>& fill, int64_t slot) {
  std::vector<float>& b = blocks[static_cast<size_t>(static_cast<uint64_t>(slot) / kBlockSlots)];
  const auto width = static_cast<int64_t>(fill.size());
  if (b.empty()) {
    b.resize(static_cast<size_t>(kBlockSlots * width));
    for (int64_t i = 0; i < kBlockSlots; ++i) std::copy(fill.begin(), fill.end(), b.begin() + i * width);
  }
  return b.data() + static_cast<int64_t>(static_cast<uint64_t>(slot) % kBlockSlots) * width;
}

std::vector<int64_t> KvPool::stored_slots() const {
  std::vector<int64_t> slots;
  for (size_t b = 0; b < k_blocks_.size(); ++b) {
    if (k_blocks_[b].empty() && (mla || v_blocks_[b].empty())) continue;
    const int64_t first = static_cast<int64_t>(b) * kBlockSlots;
    for (int64_t slot = first; slot < std::min(num_slots, first + kBlockSlots); ++slot) slots.push_back(slot);
  }
  return slots;
}

ValueFn value_fn(const ValueSource& values) {
  return [&values](int32_t layer, Tensor t, int32_t request, int32_t column, int32_t head, std::span<float> out) {
    values.fill(layer, t, request, column, head, out);
  };
}

Poison nan_poison() {
  Poison p;
  p.k = p.v = std::numeric_limits<float>::quiet_NaN();
  return p;
}

Poison finite_poison(DType dtype) {
  // A power of two well inside the dtype's range: fp16 tops out at 65504, fp8 e4m3 at 448.
  Poison p;
  p.v = dtype == DType::fp16 ? 16384.0f : dtype == DType::fp8_e4m3 ? 256.0f : 0x1p60f;
  return p;
}

KvPools::KvPools(const Scenario& s, const CacheState& cache, const ValueSource& values)
    : KvPools(s, cache, value_fn(values), s.values.poison ? nan_poison() : Poison{}) {}

KvPools::KvPools(const Scenario& s, const CacheState& cache, const ValueFn& values, Poison poison, bool scaled) {
  const Model& m = s.model;
  for (int32_t l = 0; l < static_cast<int32_t>(m.layers.size()); ++l) {
    KvPool p;
    p.kind = pool_of(s, l);
    p.num_slots = p.kind == PoolKind::swa ? cache.swa_slots : cache.full_slots;
    p.kv_heads = m.kv_heads;
    p.head_dim = m.head_dim;
    p.v_head_dim = m.v_head_dim;
    p.mla = m.mla;
    p.content_ = p.kind == PoolKind::swa ? &cache.swa_content : &cache.full_content;
    if (scaled) {
      p.k_scale = m.layers[static_cast<size_t>(l)].k_scale;
      p.v_scale = m.layers[static_cast<size_t>(l)].v_scale;
    }
    // The fill row: the poison's pattern, else its value in every element; stored, so read scaled.
    auto fill = [](float value, const std::vector<float>& row, int64_t width, float scale) {
      std::vector<float> r = row.empty() ? std::vector<float>(static_cast<size_t>(width), value) : row;
      for (float& x : r) x *= scale;
      return r;
    };
    p.k_fill_ = fill(poison.k, poison.k_row, p.k_width(), p.k_scale);
    if (!m.mla) p.v_fill_ = fill(poison.v, poison.v_row, p.v_width(), p.v_scale);
    const auto blocks = static_cast<size_t>((p.num_slots + KvPool::kBlockSlots - 1) / KvPool::kBlockSlots);
    p.k_blocks_.resize(blocks);
    if (!m.mla) p.v_blocks_.resize(blocks);
    for (int64_t slot = 0; slot < p.num_slots; ++slot) {
      const SlotContent& c = p.content(slot);
      if (!c.live() || !c.written || c.column < 0) continue;
      float* k_row = p.k_row_for_write(slot);
      float* v_row = m.mla ? nullptr : p.v_row_for_write(slot);
      for (int32_t h = 0; h < m.kv_heads; ++h) {
        values(l, Tensor::k, c.request, c.column, h,
               {k_row + int64_t{h} * m.head_dim, static_cast<size_t>(m.head_dim)});
        if (!m.mla)
          values(l, Tensor::v, c.request, c.column, h,
                 {v_row + int64_t{h} * m.v_head_dim, static_cast<size_t>(m.v_head_dim)});
      }
    }
    pools_.push_back(std::move(p));
  }
}

}  // namespace kvfuzz
