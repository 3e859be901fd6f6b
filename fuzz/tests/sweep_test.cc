// Every registered backend passes every property — single-case and metamorphic — over thousands
// of generated cases per CI run (KVFUZZ_TEST_LEVEL scales the count). A finding here is either a
// backend bug or a false alarm of the suite; both must be fixed, not skipped.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "backends/registry.h"
#include "fuzz/campaign.h"
#include "fuzz/case_check.h"
#include "reference/scenario_json.h"
#include "reference/tests/test_level.h"

namespace kvfuzz {
namespace {

void sweep(Profile profile, int64_t cases, uint64_t seed) {
  int64_t runs = 0;
  for (int64_t i = 0; i < cases; ++i) {
    const Scenario s = generate(campaign_case_seed(seed, i), profile);
    const CaseReport r = check_all(s, all_backends(), {{}, i % 4 == 0, static_cast<uint64_t>(i)});
    runs += r.backends_run;
    for (const Finding& f : r.findings)
      ADD_FAILURE() << to_string(profile) << " case " << i << ": " << f.backend << ": " << f.property << ": " << f.message
                    << "\n" << to_json(s);
    if (::testing::Test::HasFailure()) return;  // one case to look at is enough
  }
  EXPECT_GT(runs, cases * static_cast<int64_t>(all_backends().size()) / 2) << "most backends should run most cases";
}

// The same as a RapidCheck property (RC_PARAMS / the test level set the count): on a failure
// RapidCheck prints the seed and profile that reproduce it.
RC_GTEST_PROP(Sweep, EveryBackendKeepsEveryProperty, ()) {
  const auto seed = *rc::gen::arbitrary<uint64_t>();
  const Profile profile = *rc::gen::element(Profile::tiny, Profile::small);
  const Scenario s = generate(seed, profile);
  const CaseReport r = check_all(s, all_backends(), {{}, true, seed});
  RC_ASSERT(r.findings.empty());
}

TEST(Sweep, EveryBackendPassesTinyCases) { sweep(Profile::tiny, testing::test_cases(2000), 101); }
TEST(Sweep, EveryBackendPassesSmallCases) { sweep(Profile::small, testing::test_cases(1000), 202); }
TEST(Sweep, EveryBackendPassesMediumCases) { sweep(Profile::medium, testing::test_cases(60), 303); }

}  // namespace
}  // namespace kvfuzz
