#include "reference/values.h"

#include <cmath>

#include "reference/rng.h"

namespace kvfuzz {

ValueSource::ValueSource(const Scenario& s)
    : cfg_(s.values),
      head_dim_(s.model.head_dim),
      v_head_dim_(s.model.v_head_dim),
      mla_(s.model.mla),
      significand_(significand_bits(s.values.dtype)) {}

int32_t ValueSource::width(Tensor t) const { return t == Tensor::v ? v_head_dim_ : head_dim_; }

int32_t ValueSource::signature_radix() const { return 1 << std::min(significand_, 12); }

void ValueSource::fill(int32_t layer, Tensor t, int32_t request, int32_t column, int32_t head,
                       std::span<float> out) const {
  if (mla_ && t == Tensor::v) t = Tensor::k;  // the latent: V is a prefix of K
  const auto n = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(out.size()), width(t)));

  if (cfg_.fill == Fill::signature) {
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
    return;
  }

  // Random: m * 2^-(p-1) with m a uniform integer in [-(2^p - 1), 2^p - 1] and p the dtype's
  // significand bits, so |value| < 2 and every value is exact in the dtype.
  const uint64_t base = hash_words(cfg_.seed, (static_cast<uint64_t>(layer) << 8) | static_cast<uint64_t>(t),
                                   static_cast<uint64_t>(static_cast<uint32_t>(request)),
                                   static_cast<uint64_t>(static_cast<uint32_t>(column)),
                                   static_cast<uint64_t>(static_cast<uint32_t>(head)));
  const uint64_t span = (uint64_t{1} << (significand_ + 1)) - 1;  // 2^(p+1) - 1 integers
  const int64_t offset = (int64_t{1} << significand_) - 1;
  const float scale = std::ldexp(1.0f, 1 - significand_);
  for (size_t d = 0; d < n; ++d) {
    const uint64_t h = mix64(base + (d + 1) * 0x9e3779b97f4a7c15ULL);
    const int64_t m = static_cast<int64_t>(h % span) - offset;
    out[d] = static_cast<float>(m) * scale;
  }
}

}  // namespace kvfuzz
