// When a time-bounded campaign starts another case (fuzz/start_rule.h): until the deadline where
// the deadline cut bounds a case in flight, else as long as the median of the latest checks.
#include <gtest/gtest.h>

#include "backends/registry.h"
#include "fuzz/start_rule.h"

namespace kvfuzz {
namespace {

TEST(StartRule, WithoutATimeLimitEveryCaseStarts) {
  StartRule rule(0, false, 4);
  rule.checked(100);
  EXPECT_TRUE(rule.may_start(1e6));
}

TEST(StartRule, WhereTheDeadlineCutBoundsCasesTheyStartUntilTheDeadline) {
  StartRule rule(45, true, 64);
  for (int i = 0; i < 64; ++i) rule.checked(30);  // flashinfer_mla's first 64 cases on an H200
  EXPECT_TRUE(rule.may_start(30.4));
  EXPECT_TRUE(rule.may_start(44.9));
  EXPECT_FALSE(rule.may_start(45));
}

TEST(StartRule, ACaseThatWouldEndPastTheBudgetDoesNotStart) {
  StartRule rule(45, false, 64);
  EXPECT_TRUE(rule.may_start(44.9));  // nothing known yet
  for (int i = 0; i < 64; ++i) rule.checked(30);
  EXPECT_DOUBLE_EQ(rule.expected_check(), 30);
  EXPECT_TRUE(rule.may_start(14.9));
  EXPECT_FALSE(rule.may_start(15.1));  // it may compile too: per-job workers and in-process checks are not cut
}

TEST(StartRule, AFewSlowFirstChecksDoNotStopTheCampaign) {
  StartRule rule(10, false, 4);
  for (int i = 0; i < 4; ++i) rule.checked(3);  // one compile a job
  for (int i = 0; i < 40; ++i) rule.checked(0.05);
  // The mean of every check so far (0.32 s) would stop it at 9.68 s; the median does not.
  EXPECT_DOUBLE_EQ(rule.expected_check(), 0.05);
  EXPECT_TRUE(rule.may_start(9.9));
  EXPECT_FALSE(rule.may_start(9.96));
}

TEST(StartRule, SlowChecksDecideOnceTheyAreHalfOfTheLatest) {
  StartRule rule(60, false, 1);  // a window of 16
  for (int i = 0; i < 100; ++i) rule.checked(0.1);
  for (int i = 0; i < 7; ++i) rule.checked(5);
  EXPECT_DOUBLE_EQ(rule.expected_check(), 0.1);
  rule.checked(5);  // 8 of 16: the upper median
  EXPECT_DOUBLE_EQ(rule.expected_check(), 5);
  for (int i = 0; i < 9; ++i) rule.checked(0.1);  // the slow ones leave the window's majority again
  EXPECT_DOUBLE_EQ(rule.expected_check(), 0.1);
}

TEST(StartRule, BuiltInBackendsAreNotCutAtTheDeadline) {
  EXPECT_FALSE(deadline_cuts_checks({}));
  EXPECT_FALSE(deadline_cuts_checks(builtin_backends()));
  EXPECT_FALSE(deadline_cuts_checks({find_backend("fa")}));
}

}  // namespace
}  // namespace kvfuzz
