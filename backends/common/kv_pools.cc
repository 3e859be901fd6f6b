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

KvPools::KvPools(const Scenario& s, const CacheState& cache, const ValueSource& values) {
  const Model& m = s.model;
  const float empty = s.values.poison ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
  for (int32_t l = 0; l < static_cast<int32_t>(m.layers.size()); ++l) {
    KvPool p;
    p.kind = pool_of(s, l);
    p.num_slots = p.kind == PoolKind::swa ? cache.swa_slots : cache.full_slots;
    p.kv_heads = m.kv_heads;
    p.head_dim = m.head_dim;
    p.v_head_dim = m.v_head_dim;
    p.mla = m.mla;
    p.content_ = p.kind == PoolKind::swa ? &cache.swa_content : &cache.full_content;
    p.k_.assign(static_cast<size_t>(p.num_slots * m.kv_heads * m.head_dim), empty);
    if (!m.mla) p.v_.assign(static_cast<size_t>(p.num_slots * m.kv_heads * m.v_head_dim), empty);
    for (int64_t slot = 0; slot < p.num_slots; ++slot) {
      const SlotContent& c = p.content(slot);
      if (!c.live() || !c.written || c.column < 0) continue;
      for (int32_t h = 0; h < m.kv_heads; ++h) {
        const size_t at = static_cast<size_t>(slot * m.kv_heads + h);
        values.fill(l, Tensor::k, c.request, c.column, h, {p.k_.data() + at * m.head_dim, static_cast<size_t>(m.head_dim)});
        if (!m.mla)
          values.fill(l, Tensor::v, c.request, c.column, h, {p.v_.data() + at * m.v_head_dim, static_cast<size_t>(m.v_head_dim)});
      }
    }
    pools_.push_back(std::move(p));
  }
}

}  // namespace kvfuzz
