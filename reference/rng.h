// Counter-based random numbers that are the same on every machine and compiler.
//
// Where it sits: everything random in kvfuzz (generated cases, K/Q/V values) comes from here.
// The generator is SplitMix64 (a 64-bit counter passed through a bijective mixer), keyed by a
// seed; `fork` derives independent streams from a tag, so adding a field to a generator does
// not shift the values of the fields after it. No std::*_distribution and no floating point,
// so a seed reproduces a case byte for byte.
//
//   Rng rng(seed);
//   int32_t page_size = rng.below(8);          // [0, 8)
//   Rng values = rng.fork("values");
#pragma once

#include <cstdint>
#include <string_view>

namespace kvfuzz {

// The SplitMix64 finalizer: a bijection on 64-bit words with full avalanche.
constexpr uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// FNV-1a over a tag, so streams can be named in code.
constexpr uint64_t hash_tag(std::string_view tag) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : tag) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h;
}

// A keyed hash of up to four words; the basis of every value in a case.
constexpr uint64_t hash_words(uint64_t key, uint64_t a, uint64_t b = 0, uint64_t c = 0,
                              uint64_t d = 0) {
  uint64_t h = mix64(key ^ 0x9e3779b97f4a7c15ULL);
  h = mix64(h ^ a);
  h = mix64(h + b * 0x9e3779b97f4a7c15ULL);
  h = mix64(h ^ (c + 0x632be59bd9b4e019ULL));
  h = mix64(h + d * 0xd6e8feb86659fd93ULL);
  return h;
}

class Rng {
 public:
  explicit constexpr Rng(uint64_t seed) : key_(mix64(seed + 0x2545f4914f6cdd1dULL)) {}

  constexpr uint64_t next() { return mix64(key_ + (++counter_) * 0x9e3779b97f4a7c15ULL); }

  // Uniform in [0, n) by the multiply-high method (Lemire), n >= 1. No division, no bias
  // worth measuring for the small n used here.
  constexpr uint64_t below(uint64_t n) {
    const uint64_t x = next();
    const uint64_t xl = x & 0xffffffffULL, xh = x >> 32, nl = n & 0xffffffffULL, nh = n >> 32;
    const uint64_t ll = xl * nl, lh = xl * nh, hl = xh * nl, hh = xh * nh;
    const uint64_t mid = (ll >> 32) + (lh & 0xffffffffULL) + (hl & 0xffffffffULL);
    return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
  }

  // Uniform in [lo, hi]; lo when hi < lo.
  constexpr int64_t range(int64_t lo, int64_t hi) {
    if (hi <= lo) return lo;
    return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1));
  }

  // True with probability num/den.
  constexpr bool chance(uint64_t num, uint64_t den) { return below(den) < num; }

  // An independent stream named by `tag`.
  constexpr Rng fork(std::string_view tag) const { return fork(hash_tag(tag)); }
  constexpr Rng fork(uint64_t tag) const { return Rng(mix64(key_ ^ mix64(tag + counter_))); }

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
};

}  // namespace kvfuzz
