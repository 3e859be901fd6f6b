// Metamorphic properties on the toy backend: a correct backend is invariant under every variant,
// and a backend whose output depends on its place in the batch is caught.
#include <gtest/gtest.h>

#include "properties/metamorphic.h"
#include "properties/tests/toy_backend.h"
#include "reference/generate.h"
#include "reference/limits.h"
#include "reference/tests/test_level.h"

namespace kvfuzz {
namespace {

using testing::Toy;
using testing::ToyBug;

TEST(Metamorphic, ProducesEveryVariantOfARichCase) {
  Scenario s = testing::toy_case();
  s.batch.graph_bs = 4;
  std::vector<std::string> names;
  for (const Variant& v : metamorphic_variants(s, 1)) names.push_back(v.name);
  EXPECT_EQ(names, (std::vector<std::string>{"batch-order", "unrelated", "replay", "kv-splits", "history", "page-size"}));
}

TEST(Metamorphic, ACorrectBackendIsInvariant) {
  int compared = 0;
  for (uint64_t seed = 0; seed < static_cast<uint64_t>(testing::test_cases(200)); ++seed) {
    const CaseContext ctx(generate(seed, Profile::small));
    const Toy toy(ToyBug::none);
    const BackendRun base = run_backend(ctx, toy);
    if (!base.ran) continue;
    ++compared;
    for (const Finding& f : check_metamorphic(ctx, base, toy, {}, seed))
      ADD_FAILURE() << "seed " << seed << ": " << f.property << ": " << f.message;
  }
  EXPECT_GT(compared, 5);
}

TEST(Metamorphic, DroppedVariantsAreCounted) {
  const CaseContext ctx(testing::toy_case());
  const Toy toy(ToyBug::no_graphs);  // the case is eager; its replay variant pads to a graph
  const BackendRun base = run_backend(ctx, toy);
  ASSERT_TRUE(base.ran);
  VariantTallies tallies;
  for (const Finding& f : check_metamorphic(ctx, base, toy, {}, 1, &tallies)) ADD_FAILURE() << f.message;
  // Of the six variants, "replay" is unsupported, five run.
  ASSERT_EQ(tallies.size(), 6u);
  EXPECT_EQ(tallies["replay"].unsupported, 1);
  EXPECT_EQ(tallies["replay"].run, 0);
  for (const char* name : {"batch-order", "unrelated", "kv-splits", "history", "page-size"})
    EXPECT_EQ(tallies[name].run, 1) << name;

  // A variant that does not validate is counted as invalid: with a request at the largest id, the
  // history variant's extra request (largest id + 1) is out of range.
  Scenario top = testing::toy_case();
  for (Op& op : top.history)
    if (op.request == 1) op.request = limits::kMaxRequestId;
  top.batch.entries[1].request = limits::kMaxRequestId;
  VariantTallies dropped;
  const std::vector<Variant> variants = metamorphic_variants(top, 1, &dropped);
  EXPECT_EQ(variants.size(), 5u);
  for (const Variant& v : variants) EXPECT_NE(v.name, "history");
  EXPECT_EQ(dropped["history"].invalid, 1);
}

TEST(Metamorphic, CatchesAnOutputThatDependsOnBatchPosition) {
  const CaseContext ctx(testing::toy_case());
  const Toy toy(ToyBug::first_row_shift);
  const BackendRun base = run_backend(ctx, toy);
  ASSERT_TRUE(base.ran);
  const auto findings = check_metamorphic(ctx, base, toy, {}, 1);
  bool order = false;
  for (const Finding& f : findings) order |= f.message.rfind("batch-order: request 0", 0) == 0;
  EXPECT_TRUE(order);
}

}  // namespace
}  // namespace kvfuzz
