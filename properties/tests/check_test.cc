// The property harness itself, on a toy backend whose bugs we control: a correct toy passes, and
// each planted bug is reported by the property that owns it, naming what a person needs.
#include <gtest/gtest.h>

#include "properties/check.h"
#include "properties/tests/toy_backend.h"
#include "properties/tolerance.h"
#include "reference/generate.h"
#include "reference/tests/test_level.h"

namespace kvfuzz {
namespace {

using testing::Toy;
using testing::ToyBug;
using testing::toy_case;

TEST(Check, ACorrectBackendPasses) {
  const CaseContext ctx(toy_case());
  const CheckResult r = check_case(ctx, Toy(ToyBug::none));
  ASSERT_TRUE(r.support.ok);
  for (const Finding& f : r.findings) ADD_FAILURE() << f.property << ": " << f.message;
}

TEST(Check, ACorrectBackendPassesGeneratedCases) {
  int ran = 0;
  for (uint64_t seed = 0; seed < static_cast<uint64_t>(testing::test_cases(300)); ++seed) {
    const CaseContext ctx(generate(seed, Profile::small));
    const CheckResult r = check_case(ctx, Toy(ToyBug::none));
    ran += r.support.ok;
    for (const Finding& f : r.findings) ADD_FAILURE() << "seed " << seed << ": " << f.property << ": " << f.message;
  }
  EXPECT_GT(ran, 10);
}

TEST(Check, UnsupportedIsNotAPass) {
  Scenario s = toy_case();
  s.model.layers[0] = {LayerKind::sliding_window, 3, 0};
  const CheckResult r = check_case(CaseContext(s), Toy(ToyBug::none));
  EXPECT_FALSE(r.support.ok);
  EXPECT_EQ(r.support.why, "full layers only");
}

const Finding* first(const CheckResult& r, const std::string& property) {
  for (const Finding& f : r.findings)
    if (f.property == property) return &f;
  return nullptr;
}

TEST(Check, AMissingKeyIsACacheExtentFinding) {
  const CheckResult r = check_case(CaseContext(toy_case()), Toy(ToyBug::short_extent));
  const Finding* f = first(r, "cache-extent");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("row 0 (request 0), query position 9"), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("missing       9"), std::string::npos) << f->message;
}

TEST(Check, AnotherRequestsSlotIsAnInBoundsFinding) {
  const CheckResult r = check_case(CaseContext(toy_case()), Toy(ToyBug::foreign_row));
  const Finding* f = first(r, "in-bounds");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("(request 1, column 0)"), std::string::npos) << f->message;
}

TEST(Check, AWrongTableEntryIsPinpointed) {
  const CheckResult r = check_case(CaseContext(toy_case()), Toy(ToyBug::wrong_table_entry));
  const Finding* f = first(r, "stride-divide");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("toy_table[0] maps layer 0, row 0 (request 0), key column 0 to slot 5; req_to_token says slot 4"),
            std::string::npos)
      << f->message;
}

TEST(Check, AWrongValueIsAnOracleFinding) {
  const CheckResult r = check_case(CaseContext(toy_case()), Toy(ToyBug::nan_value));
  const Finding* f = first(r, "oracle");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("out[0]"), std::string::npos) << f->message;
}

}  // namespace
}  // namespace kvfuzz
