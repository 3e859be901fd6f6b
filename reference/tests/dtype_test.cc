// dtype rounding and the value source: every generated value is exact in its dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "reference/dtype.h"
#include "reference/generate.h"
#include "reference/values.h"

namespace kvfuzz {
namespace {

TEST(DType, RoundsToNearestEven) {
  EXPECT_EQ(round_to(DType::bf16, 0.1f), 0.10009765625f);
  EXPECT_EQ(round_to(DType::fp16, 0.1f), 0.0999755859375f);
  EXPECT_EQ(round_to(DType::fp8_e4m3, 0.1f), 0.1015625f);
  EXPECT_EQ(round_to(DType::fp32, 0.1f), 0.1f);
  EXPECT_EQ(round_to(DType::bf16, 1.0f + 1.0f / 256), 1.0f);  // a tie goes to even
  EXPECT_EQ(round_to(DType::fp16, 1.0f + 3.0f / 2048), 1.0f + 2.0f / 1024);
}

TEST(DType, HandlesRangeEnds) {
  EXPECT_EQ(round_to(DType::fp8_e4m3, 1000.0f), 448.0f);  // saturating
  EXPECT_EQ(round_to(DType::fp8_e4m3, -1000.0f), -448.0f);
  EXPECT_TRUE(std::isinf(round_to(DType::fp16, 70000.0f)));
  EXPECT_EQ(round_to(DType::fp16, 65504.0f), 65504.0f);
  EXPECT_EQ(round_to(DType::fp8_e4m3, std::ldexp(1.0f, -9)), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_TRUE(std::isnan(round_to(DType::bf16, NAN)));
}

TEST(ValueSource, ValuesAreExactInTheirDtype) {
  for (DType d : {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3}) {
    for (Fill f : {Fill::random, Fill::signature}) {
      Scenario s = generate(5, Profile::tiny);
      s.values.dtype = d;
      s.values.fill = f;
      ValueSource src(s);
      std::vector<float> buf(static_cast<size_t>(s.model.head_dim));
      for (int32_t col = 0; col < 300; ++col) {
        for (Tensor t : {Tensor::q, Tensor::k, Tensor::v}) {
          src.fill(0, t, 3, col, 0, buf);
          for (float x : buf) ASSERT_EQ(round_to(d, x), x) << to_string(d) << " " << x;
        }
      }
    }
  }
}

TEST(ValueSource, MlaValueIsAPrefixOfK) {
  Scenario s = generate(5, Profile::tiny);
  s.model.mla = true;
  s.model.kv_heads = 1;
  s.model.head_dim = 6;
  s.model.v_head_dim = 4;
  ValueSource src(s);
  std::vector<float> k(6), v(4);
  src.fill(1, Tensor::k, 2, 9, 0, k);
  src.fill(1, Tensor::v, 2, 9, 0, v);
  EXPECT_TRUE(std::equal(v.begin(), v.end(), k.begin()));
}

TEST(ValueSource, SignaturesNameRequestAndColumn) {
  Scenario s = generate(5, Profile::tiny);
  s.values = {0, DType::fp32, Fill::signature, true};
  s.model.head_dim = 4;
  ValueSource src(s);
  std::vector<float> k(4), q(4);
  src.fill(0, Tensor::k, 6, 1234567, 0, k);
  const int32_t r = src.signature_radix();
  EXPECT_EQ(k[0], 7.0f);
  EXPECT_EQ(k[1] * r * r + k[2] * r + k[3], static_cast<float>(1234567 % (int64_t{r} * r * r)));
  src.fill(0, Tensor::q, 6, 1234567, 0, q);
  EXPECT_EQ(q, std::vector<float>(4, 0.0f));
}

TEST(ValueSource, DependsOnEveryCoordinate) {
  Scenario s = generate(5, Profile::tiny);
  s.values.fill = Fill::random;
  s.values.dtype = DType::fp32;
  s.model.head_dim = 8;
  ValueSource src(s);
  std::vector<float> a(8), b(8);
  src.fill(0, Tensor::k, 1, 2, 0, a);
  src.fill(1, Tensor::k, 1, 2, 0, b); EXPECT_NE(a, b);
  src.fill(0, Tensor::q, 1, 2, 0, b); EXPECT_NE(a, b);
  src.fill(0, Tensor::k, 2, 2, 0, b); EXPECT_NE(a, b);
  src.fill(0, Tensor::k, 1, 3, 0, b); EXPECT_NE(a, b);
  src.fill(0, Tensor::k, 1, 2, 1, b); EXPECT_NE(a, b);
  src.fill(0, Tensor::k, 1, 2, 0, b); EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace kvfuzz
