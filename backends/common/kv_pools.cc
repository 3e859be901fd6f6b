#include "backends/common/kv_pools.h"

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
  float* kd = k_.data() + (slot * kv_heads + head) * head_dim;
  for (int32_t d = 0; d < head_dim; ++d) kd[d] = k[d];
  if (mla) return;  // V is a view of K
  float* vd = v_.data() + (slot * kv_heads + head) * v_head_dim;
  for (int32_t d = 0; d < v_head_dim; ++d) vd[d] = v[d];
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

KvPools::KvPools(const Scenario& s, const CacheState& cache, const ValueFn& values, Poison poison) {
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
    p.k_.assign(static_cast<size_t>(p.num_slots * m.kv_heads * m.head_dim), poison.k);
    if (!m.mla) p.v_.assign(static_cast<size_t>(p.num_slots * m.kv_heads * m.v_head_dim), poison.v);
    auto pattern = [&](std::vector<float>& x, const std::vector<float>& row) {
      if (row.empty()) return;
      for (size_t at = 0; at + row.size() <= x.size(); at += row.size()) std::copy(row.begin(), row.end(), x.begin() + static_cast<std::ptrdiff_t>(at));
    };
    pattern(p.k_, poison.k_row);
    pattern(p.v_, poison.v_row);
    for (int64_t slot = 0; slot < p.num_slots; ++slot) {
      const SlotContent& c = p.content(slot);
      if (!c.live() || !c.written || c.column < 0) continue;
      for (int32_t h = 0; h < m.kv_heads; ++h) {
        const size_t at = static_cast<size_t>(slot * m.kv_heads + h);
        values(l, Tensor::k, c.request, c.column, h, {p.k_.data() + at * m.head_dim, static_cast<size_t>(m.head_dim)});
        if (!m.mla)
          values(l, Tensor::v, c.request, c.column, h, {p.v_.data() + at * m.v_head_dim, static_cast<size_t>(m.v_head_dim)});
      }
    }
    pools_.push_back(std::move(p));
  }
}

}  // namespace kvfuzz
