#include "reference/values.h"

#include <algorithm>
#include <cmath>

#include "reference/rng.h"

namespace kvfuzz {
namespace {

constexpr uint64_t kColumnStep = 0x9e3779b97f4a7c15ULL;  // SplitMix64's counter step
constexpr uint32_t kElementStep = 0x9e3779b9U;          // its 32-bit counterpart

// The value source's hot loop is built for AVX-512, AVX2 and the build's baseline, and the loader
// picks the best the CPU runs (function multiversioning), so a portable build (-DKVFUZZ_NATIVE=OFF)
// generates values as fast as -march=native. Integer operations and one exact product: the same
// values on every path.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KVFUZZ_VALUES_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KVFUZZ_VALUES_CLONES
#endif

// n values of the column whose key is `key`, for a dtype of p significand bits (4 <= p <= 24)
// and scale = 2^-(p-1). Integer hashing decides every bit: the top p + 1 bits of the hash, as a
// signed integer in [-2^p, 2^p - 1], move up by one when negative, giving m in [-(2^p - 1), 2^p - 1]
// (zero twice as likely as any other value). The one float operation, m * 2^-(p-1) with
// |m| < 2^p <= 2^24, is exact. The loop is branch-free, so the compiler vectorises it.
KVFUZZ_VALUES_CLONES void fill_random(uint64_t key, int32_t p, float scale, size_t n, float* out) {
  const auto lo = static_cast<uint32_t>(key), hi = static_cast<uint32_t>(key >> 32);
  const auto shift = static_cast<uint32_t>(31 - p);
  // counter = lo + d * kElementStep (mod 2^32), kept as a 32-bit induction variable so every lane
  // stays 32 bits wide and the step is an add.
  uint32_t counter = lo;
  for (size_t d = 0; d < n; ++d, counter += kElementStep) {
    const auto x = static_cast<int32_t>(lowbias32(counter ^ hi));
    const int32_t top = x >> shift;  // arithmetic shift (C++20): floor(x / 2^shift)
    out[d] = static_cast<float>(top - (top >> 31)) * scale;
  }
}

}  // namespace

ValueSource::ValueSource(const Scenario& s)
    : shared_(s.history),
      cfg_(s.values),
      head_dim_(s.model.head_dim),
      v_head_dim_(s.model.v_head_dim),
      mla_(s.model.mla),
      significand_(significand_bits(s.values.dtype)),
      scale_(std::ldexp(1.0f, 1 - significand_)),
      layers_(s.model.layers) {}

void ValueSource::dequantize(int32_t layer, Tensor t, size_t n, float* out) const {
  if (t == Tensor::q || layer < 0 || static_cast<size_t>(layer) >= layers_.size()) return;
  const float scale =
      t == Tensor::k ? layers_[static_cast<size_t>(layer)].k_scale : layers_[static_cast<size_t>(layer)].v_scale;
  if (scale == 1.0f) return;
  for (size_t d = 0; d < n; ++d) out[d] = dequantize_fp8(out[d], scale);
}

int32_t ValueSource::width(Tensor t) const { return t == Tensor::v ? v_head_dim_ : head_dim_; }

int32_t ValueSource::signature_radix() const { return 1 << std::min(significand_, 12); }

uint64_t ValueSource::stream_key(int32_t layer, Tensor t, int32_t request, int32_t head) const {
  return hash_words(cfg_.seed, (static_cast<uint64_t>(layer) << 8) | static_cast<uint64_t>(t),
                    static_cast<uint64_t>(static_cast<uint32_t>(request)),
                    static_cast<uint64_t>(static_cast<uint32_t>(head)));
}

void ValueSource::fill_signature(Tensor t, int32_t request, int32_t column, size_t n, float* out) const {
  // Q = 0, so attention averages V over the keys read: the output names them. K and V carry
  // (request + 1, column) as base-R digits: [request+1, column / R^2, column / R, column] mod R.
  const int32_t r = signature_radix();
  for (size_t d = 0; d < n; ++d) {
    int32_t digit = 0;
    switch (d % 4) {
      case 0: digit = (request + 1) % r; break;
      case 1: digit = column / r / r % r; break;
      case 2: digit = column / r % r; break;
      case 3: digit = column % r; break;
    }
    out[d] = t == Tensor::q ? 0.0f : static_cast<float>(digit);
  }
}

void ValueSource::fill(int32_t layer, Tensor t, int32_t request, int32_t column, int32_t head,
                       std::span<float> out) const {
  if (mla_ && t == Tensor::v) t = Tensor::k;  // the latent: V is a prefix of K
  if (t != Tensor::q) request = shared_.owner(request, column);
  const auto n = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(out.size()), width(t)));
  if (cfg_.fill == Fill::signature) {
    fill_signature(t, request, column, n, out.data());
  } else {
    const uint64_t stream = stream_key(layer, t, request, head);
    fill_random(mix64(stream + static_cast<uint64_t>(static_cast<uint32_t>(column) + 1ULL) * kColumnStep), significand_,
                scale_, n, out.data());
  }
  dequantize(layer, t, n, out.data());
}

void ValueSource::fill_columns(int32_t layer, Tensor t, int32_t request, int32_t column, int32_t count,
                               int32_t head, float* out, int32_t stride) const {
  const auto n = static_cast<size_t>(width(t));
  if (mla_ && t == Tensor::v) t = Tensor::k;
  const bool shared = t != Tensor::q && !shared_.empty();
  int32_t owner = shared ? shared_.owner(request, column) : request;
  uint64_t stream = stream_key(layer, t, owner, head);
  for (int32_t i = 0; i < count; ++i) {
    float* o = out + static_cast<size_t>(i) * static_cast<size_t>(stride);
    const int32_t c = column + i;
    if (shared && shared_.owner(request, c) != owner) {  // past a shared prefix: the next owner's stream
      owner = shared_.owner(request, c);
      stream = stream_key(layer, t, owner, head);
    }
    if (cfg_.fill == Fill::signature) fill_signature(t, owner, c, n, o);
    else fill_random(mix64(stream + static_cast<uint64_t>(static_cast<uint32_t>(c) + 1ULL) * kColumnStep),
                     significand_, scale_, n, o);
    dequantize(layer, t, n, o);
    std::fill(o + n, o + stride, 0.0f);
  }
}

}  // namespace kvfuzz
