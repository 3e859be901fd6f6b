// How run_backend classifies what goes wrong inside a backend run: a backend that throws has
// crashed (a finding named after it), a read past the end of one of its own inputs is in-bounds,
// and a mistake of kvfuzz's own checking code is a HarnessError, never filed under the backend.
#include <gtest/gtest.h>

#include "backends/common/harness_error.h"
#include "properties/check.h"
#include "properties/tests/toy_backend.h"

namespace kvfuzz {
namespace {

using testing::Toy;
using testing::toy_case;
using testing::ToyBug;

std::vector<Finding> findings_of(ToyBug bug) {
  const CaseContext ctx(toy_case());
  return check_case(ctx, Toy(bug)).findings;
}

TEST(Errors, ABackendThatThrowsHasCrashed) {
  const std::vector<Finding> f = findings_of(ToyBug::throws_in_plan);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].property, "crash");
  EXPECT_EQ(f[0].backend, "toy");
  EXPECT_EQ(f[0].message, "the backend threw: toy planner gave up");
}

TEST(Errors, AnOutOfRangeInTheBackendsOwnCodeIsACrashNotInBounds) {
  const std::vector<Finding> f = findings_of(ToyBug::vector_at_in_run);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].property, "crash");
  EXPECT_EQ(f[0].message.rfind("the backend threw: ", 0), 0u) << f[0].message;
}

TEST(Errors, ReadingReqToTokenPastItsEndIsInBoundsAndNamesTheInput) {
  const std::vector<Finding> f = findings_of(ToyBug::reads_past_row);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].property, "in-bounds");
  // toy_case: max_requests 4 (5 rows with the padding row), max_context_len 32; request 0 is row 1.
  EXPECT_EQ(f[0].message, "read of req_to_token: req_to_token[1][32] is outside its 5 x 32 entries");
}

TEST(Errors, AHarnessMistakeIsAHarnessErrorNotAFinding) {
  const CaseContext ctx(toy_case());
  try {
    check_case(ctx, Toy(ToyBug::check_asks_past_row));
    ADD_FAILURE() << "no HarnessError";
  } catch (const HarnessError& e) {
    EXPECT_NE(std::string(e.what()).find("harness error: metadata check of row 0: req_to_token[1][32]"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kvfuzz
