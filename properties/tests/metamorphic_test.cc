// Metamorphic properties on the toy backend: a correct backend is invariant under every variant,
// and a backend whose output depends on its place in the batch is caught.
#include <gtest/gtest.h>

#include "properties/metamorphic.h"
#include "properties/tests/toy_backend.h"
#include "reference/generate.h"
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
