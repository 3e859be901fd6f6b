#include "reference/dtype.h"

#include <bit>
#include <cmath>
#include <limits>

namespace kvfuzz {

std::string_view to_string(DType d) {
  switch (d) {
    case DType::fp32: return "fp32";
    case DType::fp16: return "fp16";
    case DType::bf16: return "bf16";
    case DType::fp8_e4m3: return "fp8_e4m3";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  for (DType d : {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3})
    if (s == to_string(d)) return d;
  return std::nullopt;
}

int significand_bits(DType d) {
  switch (d) {
    case DType::fp32: return 24;
    case DType::fp16: return 11;
    case DType::bf16: return 8;
    case DType::fp8_e4m3: return 4;
  }
  return 24;
}

double unit_roundoff(DType d) { return std::ldexp(1.0, -significand_bits(d)); }

namespace {

// Rounds x to `bits` significand bits with exponents no lower than `min_exp` (the exponent of the
// smallest normal number; below it the spacing stays fixed, as in subnormals).
float round_significand(float x, int bits, int min_exp) {
  if (!std::isfinite(x) || x == 0.0f) return x;
  int e;
  std::frexp(x, &e);  // x = f * 2^e, 0.5 <= |f| < 1, so the leading bit has weight 2^(e-1)
  const int lead = std::max(e - 1, min_exp);
  const double quantum = std::ldexp(1.0, lead - (bits - 1));
  return static_cast<float>(std::nearbyint(static_cast<double>(x) / quantum) * quantum);
}

}  // namespace

float round_to(DType d, float x) {
  switch (d) {
    case DType::fp32: return x;
    case DType::bf16:
      if (std::isfinite(x)) {  // round to nearest even on the upper 16 bits
        uint32_t bits = std::bit_cast<uint32_t>(x);
        bits += 0x7fffu + ((bits >> 16) & 1u);
        const float r = std::bit_cast<float>(bits & 0xffff0000u);
        if (std::isfinite(r)) return r;
      }
      return round_significand(x, 8, -126);
    case DType::fp16: {
      const float r = round_significand(x, 11, -14);
      return std::fabs(r) > 65504.0f ? std::copysign(std::numeric_limits<float>::infinity(), r) : r;
    }
    case DType::fp8_e4m3: {
      if (std::isnan(x)) return x;
      const float r = round_significand(x, 4, -6);
      return std::fabs(r) > 448.0f ? std::copysign(448.0f, r) : r;  // saturating, as __nv_cvt
    }
  }
  return x;
}

float dequantize_fp8(float x, float scale) { return round_to(DType::fp8_e4m3, x / scale) * scale; }

}  // namespace kvfuzz
