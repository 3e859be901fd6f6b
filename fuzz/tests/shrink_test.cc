// The shrinker keeps the failure and makes the case small enough to read.
#include <gtest/gtest.h>

#include "fuzz/shrink.h"
#include "properties/tests/toy_backend.h"
#include "reference/generate.h"

namespace kvfuzz {
namespace {

// A big decode case the toy handles: many requests, long histories, extra layers.
Scenario big_case() {
  Scenario s = testing::toy_case();
  s.model.layers = {{}, {}, {}};
  s.model.q_heads = 8;
  s.model.kv_heads = 2;
  s.cache = {4, 400, 0, 8, 512, true};
  s.history.clear();
  s.batch.entries.clear();
  for (int32_t r = 0; r < 6; ++r) {
    s.history.push_back({OpKind::admit, r, 0, {}, {}});
    s.history.push_back({OpKind::extend, r, 100 + 7 * r, {}, {}});
    s.history.push_back({OpKind::decode, r, 0, {}, {}});
    s.batch.entries.push_back({r, 0, {}});
  }
  s.batch.graph_bs = 8;
  return s;
}

TEST(Shrink, KeepsTheFailureAndShrinksToAFewTokens) {
  const testing::Toy toy(testing::ToyBug::short_extent);
  const Scenario s = big_case();
  const ShrinkTarget target{"cache-extent/toy", &toy, {}, false};
  ASSERT_TRUE(fails_as(s, target).has_value());
  const ShrinkResult r = shrink(s, target, {60, 5000});
  ASSERT_TRUE(fails_as(r.scenario, target).has_value());
  const CaseSize size = case_size(r.scenario);
  EXPECT_EQ(size.requests, 1);
  EXPECT_LE(size.max_tokens, 4);
  EXPECT_EQ(size.layers, 1);
  EXPECT_EQ(r.scenario.model.q_heads, 1);
  EXPECT_EQ(r.scenario.batch.graph_bs, 0);
  EXPECT_EQ(r.finding.signature(), "cache-extent/toy");
}

TEST(Shrink, LeavesAPassingCaseAlone) {
  const testing::Toy toy(testing::ToyBug::none);
  const ShrinkResult r = shrink(big_case(), {"cache-extent/toy", &toy, {}, false}, {10, 100});
  EXPECT_EQ(r.scenario, big_case());
  EXPECT_TRUE(r.finding.property.empty());
}

}  // namespace
}  // namespace kvfuzz
