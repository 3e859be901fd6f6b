// Every registered backend passes every property — single-case and metamorphic — over thousands
// of generated cases per CI run (KVFUZZ_TEST_LEVEL scales the count). A finding here is either a
// backend bug or a false alarm of the suite; both must be fixed, not skipped.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <ostream>
#include <vector>

#include "backends/registry.h"
#include "fuzz/campaign.h"
#include "fuzz/case_check.h"
#include "fuzz/reductions.h"
#include "fuzz/replay.h"
#include "reference/scenario_json.h"
#include "reference/tests/test_level.h"
#include "reference/validate.h"

namespace kvfuzz {

// How RapidCheck shows a generated Scenario in a counterexample: the case file itself.
void showValue(const Scenario& s, std::ostream& os) { os << to_json(s); }

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

// A generated case that shrinks the way kvfuzz's shrinker does — by the reductions of
// fuzz/reductions.h that still validate (fewer requests, shorter extends, fewer layers, smaller
// pages) — rather than by its seed, whose neighbours are unrelated cases.
rc::Gen<Scenario> generated_case() {
  return [](const rc::Random& random, int) -> rc::Shrinkable<Scenario> {
    rc::Random r(random);
    const uint64_t seed = r.next();
    const Profile profile = r.next() % 2 == 0 ? Profile::tiny : Profile::small;
    return rc::shrinkable::shrinkRecur(generate(seed, profile), [](const Scenario& s) {
      std::vector<Scenario> smaller;
      for (Scenario& c : reductions(s))
        if (is_valid(c)) smaller.push_back(std::move(c));
      return rc::seq::fromContainer(std::move(smaller));
    });
  };
}

// The same as a RapidCheck property (RC_PARAMS / the test level set the count). On a failure
// RapidCheck prints the shrunk case as JSON (showValue) and the log: every finding and the
// command that replays it.
RC_GTEST_PROP(Sweep, EveryBackendKeepsEveryProperty, ()) {
  const Scenario s = *generated_case();
  const auto variant_seed = *rc::gen::noShrink(rc::gen::arbitrary<uint64_t>());
  const CaseReport r = check_all(s, all_backends(), {{}, true, variant_seed});
  for (const Finding& f : r.findings) RC_LOG() << f.backend << ": " << f.property << ": " << f.message << "\n";
  if (!r.findings.empty())
    RC_LOG() << "replay: save the case above as case.json, then "
             << replay_command({"case.json", "all", {}, variant_seed, {}}) << "\n";
  RC_ASSERT(r.findings.empty());
}

TEST(Sweep, EveryBackendPassesTinyCases) { sweep(Profile::tiny, testing::test_cases(2000), 101); }
TEST(Sweep, EveryBackendPassesSmallCases) { sweep(Profile::small, testing::test_cases(1000), 202); }
TEST(Sweep, EveryBackendPassesMediumCases) { sweep(Profile::medium, testing::test_cases(60), 303); }

}  // namespace
}  // namespace kvfuzz
