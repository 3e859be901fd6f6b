// The deterministic value source: what every Q, K and V element is, by logical coordinates.
//
// Where it sits: the single definition of content. The cache simulator writes pools from it (by
// the request and column that own each slot), the batch gets its queries from it, and the oracle
// reads K/V from it directly, never through a pool or a table. Values are exactly representable in
// the case's dtype, so fp32 storage holds them bit for bit and any backend precision sees the same
// inputs.
//
// Random fill, by integer hashing only (the same bits on every machine and compiler): a stream
// key per (layer, tensor, request, head) from hash_words, a 64-bit key per column from the
// SplitMix64 counter mix of the stream key, then one 32-bit hash per element, vectorisable:
// x = lowbias32(((lo + d * 0x9e3779b9) mod 2^32) xor hi), with lo, hi the halves of the column key.
// The top p + 1 bits of x (p = the dtype's significand bits) read as a signed integer t in
// [-2^p, 2^p - 1]; m = t + 1 when t < 0, else t; the value is m * 2^-(p-1): |value| < 2, exact in
// the dtype. K and V of a layer with fp8 scales (Layer::k_scale, v_scale) are what a kernel reads
// from the cache: dequantize_fp8(x, scale) of the value x drawn (dtype.h), so the oracle, the pools
// and the new K/V all hold the dequantized values. K and V of a column in a shared prefix (a `share` op) are its
// owner's (shared_prefix.h): the request that wrote them.
//
//   ValueSource src(scenario);
//   std::vector<float> k(model.head_dim);
//   src.fill(layer, Tensor::k, request, column, kv_head, k);
//   src.fill_columns(layer, Tensor::k, request, column, 128, kv_head, kblock, /*stride=*/dp);
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "reference/scenario.h"
#include "reference/shared_prefix.h"

namespace kvfuzz {

enum class Tensor : uint8_t { q, k, v };

// Chris Wellons' lowbias32: a bijection on 32-bit words with low bias, two multiplies.
constexpr uint32_t lowbias32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

class ValueSource {
 public:
  explicit ValueSource(const Scenario& s);

  // Width of one head's vector of tensor t: head_dim for q and k, v_head_dim for v.
  int32_t width(Tensor t) const;

  // Writes the head vector of (layer, tensor, request, column, head) to out[0 .. width(t)).
  // For an MLA model, V is the first v_head_dim values of K.
  void fill(int32_t layer, Tensor t, int32_t request, int32_t column, int32_t head, std::span<float> out) const;

  // The head vectors of columns [column, column + count): vector i at out + i * stride, its
  // width(t) values followed by zeros up to stride (>= width(t)). The same values as fill.
  void fill_columns(int32_t layer, Tensor t, int32_t request, int32_t column, int32_t count, int32_t head,
                    float* out, int32_t stride) const;

  // The request whose K/V (request, column) holds (itself, or the owner of a shared prefix).
  int32_t owner(int32_t request, int32_t column) const { return shared_.owner(request, column); }

  // The radix of signature digits: the largest power of two whose digits the dtype holds exactly.
  int32_t signature_radix() const;

 private:
  uint64_t stream_key(int32_t layer, Tensor t, int32_t request, int32_t head) const;
  void fill_signature(Tensor t, int32_t request, int32_t column, size_t n, float* out) const;
  // A layer's fp8 scales applied to n values of tensor t (q, or a scale of 1: unchanged).
  void dequantize(int32_t layer, Tensor t, size_t n, float* out) const;

  SharedPrefixes shared_;
  ValueConfig cfg_;
  int32_t head_dim_, v_head_dim_;
  bool mla_;
  int32_t significand_;
  float scale_;  // 2^-(significand_ - 1)
  std::vector<Layer> layers_;  // their k_scale, v_scale
};

}  // namespace kvfuzz
