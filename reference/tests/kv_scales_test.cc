// fp8 KV caches with per-tensor scales (Layer::k_scale, v_scale): the stored value and what a
// kernel reads, the case fields (optional, checked, naming the field), the value source's
// dequantized K/V, and the `fp8` profile that draws them.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "reference/case_error.h"
#include "reference/dtype.h"
#include "reference/generate.h"
#include "reference/scenario_json.h"
#include "reference/tests/test_level.h"
#include "reference/validate.h"
#include "reference/values.h"

namespace kvfuzz {
namespace {

TEST(KvScales, DequantizeIsStoredTimesScaleSaturated) {
  EXPECT_EQ(dequantize_fp8(1.875f, 1.0f), 1.875f);
  EXPECT_EQ(dequantize_fp8(1.875f, 0.5f), 1.875f);          // 3.75 stored: exact
  EXPECT_EQ(dequantize_fp8(1.0f, 0.375f), 0.375f * 2.75f);  // 2.666.. stored as 2.75
  EXPECT_EQ(dequantize_fp8(1.875f, 0x1p-8f), 1.75f);        // 480 saturates at 448: 448 / 256
  EXPECT_EQ(dequantize_fp8(-1.875f, 0x1p-8f), -1.75f);
  EXPECT_EQ(dequantize_fp8(0.125f, 16.0f), 0.125f);     // 2^-7 stored: a subnormal, exact
  EXPECT_EQ(dequantize_fp8(0.109375f, 16.0f), 0.125f);  // 3.5 * 2^-9: subnormal, ties to even
  EXPECT_TRUE(std::isnan(dequantize_fp8(NAN, 0.5f)));
}

Scenario fp8_case() {
  Scenario s = generate(3, Profile::tiny);
  s.values.dtype = DType::fp8_e4m3;
  return s;
}

std::string with_layer_field(const Scenario& s, const std::string& field) {
  std::string text = to_json(s);
  const std::string kind = "{\"kind\": ";
  const size_t at = text.find(kind);
  return text.insert(at + 1, field + ", ");
}

// Absent fields are 1 and write nothing (every older case keeps its bytes); present ones round-trip.
TEST(KvScales, CaseFieldsAreOptionalAndRoundTrip) {
  Scenario s = fp8_case();
  const std::string plain = to_json(s);
  EXPECT_EQ(plain.find("k_scale"), std::string::npos);
  EXPECT_EQ(plain.find("v_scale"), std::string::npos);
  EXPECT_EQ(scenario_from_json(plain).model.layers[0].k_scale, 1.0f);
  s.model.layers[0].k_scale = 0.375f;
  s.model.layers[0].v_scale = 0x1p-8f;
  validate(s);
  const Scenario back = scenario_from_json(to_json(s));
  EXPECT_EQ(back, s);
  EXPECT_NE(to_json(s).find("\"k_scale\": 0.375"), std::string::npos) << to_json(s);
}

TEST(KvScales, BadScalesAreRefusedNamingTheField) {
  struct Bad {
    std::string field, expected;
    DType dtype = DType::fp8_e4m3;
  };
  const std::vector<Bad> bad = {
      {"\"k_scale\": \"x\"", "model.layers[0].k_scale: expected a number"},
      {"\"v_scale\": 0.1", "model.layers[0].v_scale: expected a float32 value"},
      {"\"k_scale\": 0", "model.layers[0].k_scale: 0.000000 is out of range"},
      {"\"k_scale\": -0.5", "model.layers[0].k_scale: -0.500000 is out of range"},
      {"\"v_scale\": 64", "model.layers[0].v_scale: 64.000000 is out of range"},
      {"\"k_scale\": 0.59375", "model.layers[0].k_scale: 0.593750 has more than 4 significand bits"},
      {"\"k_scale\": 0.5", "model.layers[0].k_scale: a scale other than 1 needs an fp8 cache", DType::bf16},
  };
  for (const Bad& b : bad) {
    Scenario s = fp8_case();
    s.values.dtype = b.dtype;
    try {
      validate(scenario_from_json(with_layer_field(s, b.field)));
      ADD_FAILURE() << b.field << ": accepted";
    } catch (const InvalidCase& e) {
      EXPECT_NE(std::string(e.what()).find(b.expected), std::string::npos) << b.field << ": " << e.what();
    }
  }
}

// K and V of a scaled layer are what the kernel reads: the unscaled value's e4m3(x / scale) * scale,
// in fill and fill_columns alike; Q and other layers are untouched.
TEST(KvScales, ValueSourceHoldsWhatTheKernelReads) {
  Scenario s = fp8_case();
  const Scenario unscaled = s;
  s.model.layers[0].k_scale = 0.375f;
  s.model.layers[0].v_scale = 0x1p-8f;
  const ValueSource scaled_src(s), src(unscaled);
  const int32_t dim = s.model.head_dim, vdim = s.model.v_head_dim;
  std::vector<float> a(static_cast<size_t>(dim)), b(static_cast<size_t>(dim)), cols(static_cast<size_t>(dim) * 4);
  int32_t changed = 0;
  for (Tensor t : {Tensor::q, Tensor::k, Tensor::v}) {
    const int32_t w = t == Tensor::v ? vdim : dim;
    const float scale = t == Tensor::k ? 0.375f : t == Tensor::v ? 0x1p-8f : 1.0f;
    scaled_src.fill_columns(0, t, 0, 0, 4, 0, cols.data(), dim);
    for (int32_t col = 0; col < 4; ++col) {
      scaled_src.fill(0, t, 0, col, 0, {a.data(), static_cast<size_t>(w)});
      src.fill(0, t, 0, col, 0, {b.data(), static_cast<size_t>(w)});
      for (int32_t d = 0; d < w; ++d) {
        const float want =
            t == Tensor::q ? b[static_cast<size_t>(d)] : dequantize_fp8(b[static_cast<size_t>(d)], scale);
        ASSERT_EQ(a[static_cast<size_t>(d)], want);
        ASSERT_EQ(cols[static_cast<size_t>(col * dim + d)], want);
        changed += a[static_cast<size_t>(d)] != b[static_cast<size_t>(d)];
      }
    }
  }
  EXPECT_GT(changed, 0) << "the scales changed no value";
  if (s.model.layers.size() > 1) {  // another layer is unscaled
    scaled_src.fill(1, Tensor::k, 0, 0, 0, {a.data(), static_cast<size_t>(dim)});
    src.fill(1, Tensor::k, 0, 0, 0, {b.data(), static_cast<size_t>(dim)});
    EXPECT_EQ(a, b);
  }
}

// The fp8 profile: the same bytes for a seed, fp8 caches, valid scales, and some not 1 (the other
// profiles draw none: their golden fingerprints, generate_test.cc, are unchanged).
TEST(KvScales, Fp8ProfileDrawsScaledCaches) {
  int32_t scaled = 0, saturating = 0;
  for (uint64_t seed = 0; seed < static_cast<uint64_t>(testing::test_cases(30)); ++seed) {
    const Scenario s = generate(seed, Profile::fp8);
    ASSERT_EQ(to_json(s), to_json(generate(seed, Profile::fp8))) << seed;
    ASSERT_EQ(s.values.dtype, DType::fp8_e4m3) << seed;
    ASSERT_TRUE(is_valid(s)) << seed;
    for (const Layer& l : s.model.layers) {
      scaled += l.scaled();
      saturating += l.k_scale < 0x1p-7f || l.v_scale < 0x1p-7f;
    }
    for (const Layer& l : generate(seed, Profile::small).model.layers) EXPECT_FALSE(l.scaled()) << seed;
  }
  EXPECT_GT(scaled, 0);
  EXPECT_GT(saturating, 0);
  EXPECT_EQ(parse_profile("fp8"), Profile::fp8);
}

}  // namespace
}  // namespace kvfuzz
