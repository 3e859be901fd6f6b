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

// One layer's pool. Storage is sparse in what it materializes: blocks of kBlockSlots slots are
// allocated on their first write (filled with the pool's fill row first), and a slot of a block
// never written reads as the fill row (the poison, or 0). Memory is O(live tokens), not
// O(num_slots), so a pool of more than 2^31 elements (the `long` profile) costs what its requests
// hold; the accessors are the same for every size.
class KvPool {
 public:
  static constexpr int64_t kBlockSlots = 64;

  PoolKind kind = PoolKind::full;
  int64_t num_slots = 0;
  int32_t kv_heads = 0, head_dim = 0, v_head_dim = 0;
  bool mla = false;
  // The fp8 scales (Layer::k_scale, v_scale) a kernel reads this pool by: rows hold what the kernel
  // reads, stored * scale; the exchange sends an executor the stored values, row / scale, and the
  // scales (backends/external/exchange.cc). 1 for probe runs, whose codes are stored as they are.
  float k_scale = 1.0f, v_scale = 1.0f;

  const float* k(int64_t slot, int32_t head, const Where& where) const {
    check(slot, where);
    return k_row(slot) + int64_t{head} * head_dim;
  }
  const float* v(int64_t slot, int32_t head, const Where& where) const {
    check(slot, where);
    if (mla) return k_row(slot) + int64_t{head} * head_dim;
    return v_row(slot) + int64_t{head} * v_head_dim;
  }
  // Writes one token's K/V (set_kv_buffer).
  void write(int64_t slot, int32_t head, const float* k, const float* v, const Where& where);
  const SlotContent& content(int64_t slot) const { return (*content_)[static_cast<size_t>(slot)]; }

  // What an external executor is handed (backends/external/exchange.cc): a slot's row of every
  // head, [kv_heads][head_dim] and [kv_heads][v_head_dim] (MLA: V is K's row, whose first
  // v_head_dim values it reads), the fill row of unstored slots, and the stored slots, ascending
  // (every written slot is one; so are the other slots of their blocks, holding the fill).
  int64_t k_width() const { return int64_t{kv_heads} * head_dim; }
  int64_t v_width() const { return int64_t{kv_heads} * v_head_dim; }
  const float* k_slot(int64_t slot, const Where& where = {}) const { return k(slot, 0, where); }
  const float* v_slot(int64_t slot, const Where& where = {}) const { return v(slot, 0, where); }
  std::span<const float> k_fill() const { return k_fill_; }
  std::span<const float> v_fill() const {
    return mla ? std::span<const float>(k_fill_) : std::span<const float>(v_fill_);
  }
  std::vector<int64_t> stored_slots() const;
  // num_slots x kv_heads x head_dim: the size of the dense K pool.
  int64_t dense_elements() const { return num_slots * k_width(); }

  void check(int64_t slot, const Where& where) const {
    if (slot < 0 || slot >= num_slots)
      throw Violation(to_string(kind) + " KV pool", "slot " + std::to_string(slot) + " is outside the pool of " +
                                                        std::to_string(num_slots) + " slots", where);
  }

 private:
  friend class KvPools;
  using Blocks = std::vector<std::vector<float>>;  // [num_slots / kBlockSlots] of [kBlockSlots][width] or empty

  static const float* row(const Blocks& blocks, const std::vector<float>& fill, int64_t slot, int64_t width) {
    const std::vector<float>& b = blocks[static_cast<size_t>(static_cast<uint64_t>(slot) / kBlockSlots)];
    return b.empty() ? fill.data() : b.data() + static_cast<int64_t>(static_cast<uint64_t>(slot) % kBlockSlots) * width;
  }
  const float* k_row(int64_t slot) const { return row(k_blocks_, k_fill_, slot, k_width()); }
  const float* v_row(int64_t slot) const { return row(v_blocks_, v_fill_, slot, v_width()); }
  // The slot's row of every head, its block allocated (and filled) on first use.
  float* k_row_for_write(int64_t slot) { return row_for_write(k_blocks_, k_fill_, slot); }
  float* v_row_for_write(int64_t slot) { return row_for_write(v_blocks_, v_fill_, slot); }
  static float* row_for_write(Blocks& blocks, const std::vector<float>& fill, int64_t slot);

  Blocks k_blocks_, v_blocks_;          // v_blocks_ empty for MLA
  std::vector<float> k_fill_, v_fill_;  // [kv_heads][head_dim], [kv_heads][v_head_dim]
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
  // scaled: the layers' fp8 scales apply (the values are the value source's, dequantized, and the
  // poison is a stored value, read times the scale); false for probe runs.
  KvPools(const Scenario& s, const CacheState& cache, const ValueFn& values, Poison poison, bool scaled = true);
  const KvPool& layer(int32_t l) const { return pools_[static_cast<size_t>(l)]; }
  KvPool& layer(int32_t l) { return pools_[static_cast<size_t>(l)]; }
  int32_t layers() const { return static_cast<int32_t>(pools_.size()); }

 private:
  std::vector<KvPool> pools_;
};

}  // namespace kvfuzz
