// The value source's random fill: the documented formula, the block form, and a fill that looks
// random (moments, bit balance, no correlation between neighbours).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "reference/dtype.h"
#include "reference/rng.h"
#include "reference/values.h"

namespace kvfuzz {
namespace {

Scenario random_scenario(DType dtype, int32_t head_dim, uint64_t seed) {
  Scenario s;
  s.model.head_dim = head_dim;
  s.model.v_head_dim = head_dim;
  s.values = {seed, dtype, Fill::random, true};
  return s;
}

// The value of element d, written step by step from the formula in values.h (scalar code, not
// the vectorised loop the source runs).
float by_formula(uint64_t seed, DType dtype, int32_t layer, Tensor t, int32_t request, int32_t column, int32_t head,
                 int32_t d) {
  const uint64_t stream = hash_words(seed, (uint64_t(layer) << 8) | uint64_t(t), uint64_t(request), uint64_t(head));
  const uint64_t key = mix64(stream + (uint64_t(column) + 1) * 0x9e3779b97f4a7c15ULL);
  const uint32_t lo = uint32_t(key), hi = uint32_t(key >> 32);
  const uint32_t x = lowbias32((lo + uint32_t(d) * 0x9e3779b9U) ^ hi);
  const int p = significand_bits(dtype);
  const int64_t top = int64_t{x >> (31 - p)} - (int64_t{1} << (p + 1)) * (x >> 31);  // top p + 1 bits, signed
  const int64_t m = top < 0 ? top + 1 : top;
  return static_cast<float>(std::ldexp(static_cast<double>(m), 1 - p));
}

TEST(ValueSource, RandomFillFollowsTheFormula) {
  EXPECT_EQ(lowbias32(0), 0U);  // x = 0 is the mixer's fixed point; one step by hand:
  // x = 1: x ^= x >> 16 -> 1; x *= 0x7feb352d -> 0x7feb352d; x ^= x >> 15 -> 0x7feb352d ^ 0xffd6
  // = 0x7febcafb; then x *= 0x846ca68b and x ^= x >> 16 (mod 2^32).
  const uint32_t step = 0x7febcafbU * 0x846ca68bU;
  EXPECT_EQ(lowbias32(1), step ^ (step >> 16));
  for (DType dtype : {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3}) {
    const Scenario s = random_scenario(dtype, 40, 77);
    const ValueSource src(s);
    std::vector<float> k(40);
    for (int32_t column : {0, 1, 513, 70000}) {
      src.fill(2, Tensor::k, 5, column, 3, k);
      for (int32_t d = 0; d < 40; ++d)
        ASSERT_EQ(k[size_t(d)], by_formula(77, dtype, 2, Tensor::k, 5, column, 3, d)) << to_string(dtype) << " d " << d;
    }
  }
}

TEST(ValueSource, FillColumnsEqualsFillAndPadsWithZeros) {
  for (bool mla : {false, true}) {
    for (Fill f : {Fill::random, Fill::signature}) {
      Scenario s = random_scenario(DType::bf16, 24, 9);
      s.model.v_head_dim = mla ? 16 : 24;
      s.model.mla = mla;
      s.values.fill = f;
      const ValueSource src(s);
      constexpr int32_t kStride = 32, kCount = 5;
      for (Tensor t : {Tensor::q, Tensor::k, Tensor::v}) {
        std::vector<float> block(kStride * kCount, -1.0f), one(size_t(src.width(t)));
        src.fill_columns(1, t, 4, 100, kCount, 2, block.data(), kStride);
        for (int32_t i = 0; i < kCount; ++i) {
          src.fill(1, t, 4, 100 + i, 2, one);
          for (int32_t d = 0; d < kStride; ++d)
            ASSERT_EQ(block[size_t(i * kStride + d)], d < src.width(t) ? one[size_t(d)] : 0.0f)
                << "mla " << mla << " column " << 100 + i << " d " << d;
        }
      }
    }
  }
}

// Moments, sign and bit balance, and neighbour correlation of n values per dtype: bounds are
// five standard errors (or looser), so a correct fill fails with probability below 1e-5, while a
// fill that repeats, drops a bit or correlates neighbours fails at once.
TEST(ValueSource, RandomFillLooksRandom) {
  for (DType dtype : {DType::fp32, DType::bf16}) {
    const int p = significand_bits(dtype);
    const Scenario s = random_scenario(dtype, 128, 2024);
    const ValueSource src(s);
    constexpr int32_t kCols = 512, kDim = 128;
    std::vector<float> v(size_t(kCols) * kDim);
    src.fill_columns(0, Tensor::k, 1, 0, kCols, 0, v.data(), kDim);
    const double n = double(v.size());
    double sum = 0, sum2 = 0, along_d = 0, along_col = 0;
    std::vector<int64_t> bit_ones(size_t(p), 0);
    int64_t negative = 0;
    for (int32_t c = 0; c < kCols; ++c)
      for (int32_t d = 0; d < kDim; ++d) {
        const double x = v[size_t(c * kDim + d)];
        ASSERT_LT(std::abs(x), 2.0);
        sum += x;
        sum2 += x * x;
        if (d + 1 < kDim) along_d += x * v[size_t(c * kDim + d + 1)];
        if (c + 1 < kCols) along_col += x * v[size_t((c + 1) * kDim + d)];
        negative += x < 0;
        const auto m = static_cast<int64_t>(std::abs(std::ldexp(x, p - 1)));
        for (int b = 0; b < p; ++b) bit_ones[size_t(b)] += (m >> b) & 1;
      }
    // m uniform on -(2^p - 1) .. 2^p - 1 (zero twice): E x = 0, E x^2 about 4/3.
    const double var = 4.0 / 3.0;
    EXPECT_LT(std::abs(sum / n), 5 * std::sqrt(var / n)) << to_string(dtype);
    EXPECT_NEAR(sum2 / n, var, 0.05 * var) << to_string(dtype);
    EXPECT_LT(std::abs(along_d / n), 5 * var / std::sqrt(n)) << to_string(dtype);
    EXPECT_LT(std::abs(along_col / n), 5 * var / std::sqrt(n)) << to_string(dtype);
    EXPECT_LT(std::abs(negative / n - 0.5), 5 * 0.5 / std::sqrt(n)) << to_string(dtype);
    for (int b = 0; b < p; ++b)
      EXPECT_LT(std::abs(double(bit_ones[size_t(b)]) / n - 0.5), 5 * 0.5 / std::sqrt(n)) << to_string(dtype) << " bit " << b;
  }
}

TEST(ValueSource, NoTwoColumnsShareAVector) {
  const ValueSource src(random_scenario(DType::bf16, 128, 3));
  constexpr int32_t kCols = 2000;
  std::vector<float> v(size_t(kCols) * 128);
  src.fill_columns(0, Tensor::v, 0, 0, kCols, 0, v.data(), 128);
  std::vector<uint64_t> keys;
  for (int32_t c = 0; c < kCols; ++c) {
    uint64_t h = 0;
    for (int32_t d = 0; d < 128; ++d) h = mix64(h ^ uint64_t(int64_t(std::ldexp(v[size_t(c * 128 + d)], 7)) + 1000));
    keys.push_back(h);
  }
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end());
}

}  // namespace
}  // namespace kvfuzz
