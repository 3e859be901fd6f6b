// The K/V pools of every layer, filled from the value source, and the checked view kernels read.
//
// Where it sits: cache state + values -> **pools** -> executors. Each layer has one pool, as in
// production: sliding-window layers of a hybrid model use the SWA pool, every other layer the
// full pool. A slot holds the K/V of the logical token (request, column) the cache simulator
// recorded there; every other slot (page 0, free slots, the tail of partial pages, drafting steps
// not yet run) holds NaN when the case poisons, else 0 (what fixed-grid tests do, hiding bugs).
// MLA pools store only K: V is its first v_head_dim values.
//
//   KvPools pools = build_pools(scenario, cache, ValueSource(scenario));
//   const KvPool& pool = pools.layer(1);
//   const float* k = pool.k(slot, kv_head, where);   // throws Violation outside the pool
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "backends/common/violation.h"
#include "reference/cache.h"
#include "reference/scenario.h"
#include "reference/values.h"

namespace kvfuzz {

enum class PoolKind : uint8_t { full, swa };

std::string to_string(PoolKind k);

// The pool a layer reads and writes.
PoolKind pool_of(const Scenario& s, int32_t layer);

class KvPool {
 public:
  PoolKind kind = PoolKind::full;
  int64_t num_slots = 0;
  int32_t kv_heads = 0, head_dim = 0, v_head_dim = 0;
  bool mla = false;

  const float* k(int64_t slot, int32_t head, const Where& where) const {
    check(slot, where);
    return k_.data() + (slot * kv_heads + head) * head_dim;
  }
  const float* v(int64_t slot, int32_t head, const Where& where) const {
    check(slot, where);
    if (mla) return k_.data() + (slot * kv_heads + head) * head_dim;
    return v_.data() + (slot * kv_heads + head) * v_head_dim;
  }
  // Writes one token's K/V (set_kv_buffer).
  void write(int64_t slot, int32_t head, const float* k, const float* v, const Where& where);
  const SlotContent& content(int64_t slot) const { return (*content_)[static_cast<size_t>(slot)]; }
  // The raw pools, for handing to an external executor: [num_slots][kv_heads][head_dim] and
  // [num_slots][kv_heads][v_head_dim] (empty for MLA, whose V is the first v_head_dim of K).
  const std::vector<float>& k_data() const { return k_; }
  const std::vector<float>& v_data() const { return v_; }

  void check(int64_t slot, const Where& where) const {
    if (slot < 0 || slot >= num_slots)
      throw Violation(to_string(kind) + " KV pool", "slot " + std::to_string(slot) + " is outside the pool of " +
                                                        std::to_string(num_slots) + " slots", where);
  }

 private:
  friend class KvPools;
  std::vector<float> k_;  // [num_slots][kv_heads][head_dim]
  std::vector<float> v_;  // [num_slots][kv_heads][v_head_dim]; empty for MLA
  const std::vector<SlotContent>* content_ = nullptr;
};

// Where values come from: (layer, tensor, request, column, head, out[width]). The value source is
// one; the probe runs of opaque executors (properties/opaque_extent.h) supply others.
using ValueFn = std::function<void(int32_t layer, Tensor t, int32_t request, int32_t column, int32_t head, std::span<float> out)>;
ValueFn value_fn(const ValueSource& values);

// What slots no live token owns hold: NaN (a read that reaches the output shows), or finite
// values a masked read cannot change the answer with (K 0, V huge: a used read must).
struct Poison {
  float k = 0, v = 0;
  // When not empty: the [kv_heads][head_dim] / [kv_heads][v_head_dim] pattern every unowned slot
  // holds instead (probe runs code "no live token" this way).
  std::vector<float> k_row, v_row;
};
Poison nan_poison();
Poison finite_poison(DType dtype);

class KvPools {
 public:
  KvPools(const Scenario& s, const CacheState& cache, const ValueSource& values);
  KvPools(const Scenario& s, const CacheState& cache, const ValueFn& values, Poison poison);
  const KvPool& layer(int32_t l) const { return pools_[static_cast<size_t>(l)]; }
  KvPool& layer(int32_t l) { return pools_[static_cast<size_t>(l)]; }
  int32_t layers() const { return static_cast<int32_t>(pools_.size()); }

 private:
  std::vector<KvPool> pools_;
};

}  // namespace kvfuzz
