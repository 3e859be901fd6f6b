// The deterministic value source: what every Q, K and V element is, by logical coordinates.
//
// Where it sits: the single definition of content. The cache simulator writes pools from it (by
// the request and column that own each slot), the batch gets its queries from it, and the oracle
// reads K/V from it directly, never through a pool or a table. Values are exactly representable in
// the case's dtype, so fp32 storage holds them bit for bit and any backend precision sees the same
// inputs.
//
//   ValueSource src(scenario);
//   std::vector<float> k(model.head_dim);
//   src.fill(layer, Tensor::k, request, column, kv_head, k);
#pragma once

#include <cstdint>
#include <span>

#include "reference/scenario.h"

namespace kvfuzz {

enum class Tensor : uint8_t { q, k, v };

class ValueSource {
 public:
  explicit ValueSource(const Scenario& s);

  // Width of one head's vector of tensor t: head_dim for q and k, v_head_dim for v.
  int32_t width(Tensor t) const;

  // Writes the head vector of (layer, tensor, request, column, head) to out[0 .. width(t)).
  // For an MLA model, V is the first v_head_dim values of K.
  void fill(int32_t layer, Tensor t, int32_t request, int32_t column, int32_t head, std::span<float> out) const;

  // The radix of signature digits: the largest power of two whose digits the dtype holds exactly.
  int32_t signature_radix() const;

 private:
  ValueConfig cfg_;
  int32_t head_dim_, v_head_dim_;
  bool mla_;
  int32_t significand_;
};

}  // namespace kvfuzz
