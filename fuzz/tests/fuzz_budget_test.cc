// The fuzz budget bounds each measure it names, and an input already over it may keep its size.
#include <gtest/gtest.h>

#include "fuzz/fuzz_budget.h"
#include "reference/generate.h"

namespace kvfuzz {
namespace {

TEST(FuzzBudget, AdmitsMostTinyCases) {
  int admitted = 0;
  for (uint64_t seed = 0; seed < 100; ++seed) admitted += FuzzBudget{}.admits(generate(seed, Profile::tiny));
  EXPECT_GT(admitted, 90);
}

TEST(FuzzBudget, RejectsEachMeasureOverItsBound) {
  const Scenario base = generate(2, Profile::tiny);
  ASSERT_TRUE(FuzzBudget{}.admits(base));
  Scenario layers = base;
  layers.model.layers.assign(3, Layer{});
  EXPECT_FALSE(FuzzBudget{}.admits(layers));
  Scenario heads = base;
  heads.model.q_heads = heads.model.kv_heads = 8;
  EXPECT_FALSE(FuzzBudget{}.admits(heads));
  Scenario dim = base;
  dim.model.v_head_dim = 17;
  EXPECT_FALSE(FuzzBudget{}.admits(dim));
  Scenario graph = base;
  graph.batch.graph_bs = 9;
  EXPECT_FALSE(FuzzBudget{}.admits(graph));
  Scenario tokens = base;
  tokens.history.push_back({OpKind::extend, tokens.history.back().request, 65, {}, {}});
  EXPECT_FALSE(FuzzBudget{}.admits(tokens));
}

TEST(FuzzBudget, WidenedToABigCaseAdmitsItButNotMore) {
  Scenario big = generate(2, Profile::tiny);
  big.model.layers.assign(4, Layer{});
  const FuzzBudget widened = FuzzBudget{}.widened_to(big);
  EXPECT_TRUE(widened.admits(big));
  EXPECT_EQ(widened.max_layers, 4);
  big.model.layers.push_back(Layer{});
  EXPECT_FALSE(widened.admits(big));
}

}  // namespace
}  // namespace kvfuzz
