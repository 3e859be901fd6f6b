// read_diff_mechanism: each way a read set can differ from the visible set has its own name, and
// the name does not depend on how many keys are involved.
#include <gtest/gtest.h>

#include "properties/read_diff.h"

namespace kvfuzz {
namespace {

TEST(ReadDiff, NamesTheMissingKeysByWhereTheyLie) {
  EXPECT_EQ(read_diff_mechanism({3, 4, 5}, {4, 5}, {}), "missing-oldest");
  EXPECT_EQ(read_diff_mechanism({3, 4, 5, 6, 7, 8}, {6, 7, 8}, {}), "missing-oldest");  // more keys, same name
  EXPECT_EQ(read_diff_mechanism({3, 4, 5}, {3, 4}, {}), "missing-newest");
  EXPECT_EQ(read_diff_mechanism({3, 4, 5}, {3, 5}, {}), "missing-interior");
  EXPECT_EQ(read_diff_mechanism({3}, {}, {}), "missing-all");
  EXPECT_EQ(read_diff_mechanism({3, 4, 5, 6}, {4, 5}, {}), "missing-newest+missing-oldest");
}

TEST(ReadDiff, NamesTheExtraKeysByWhereTheyLie) {
  EXPECT_EQ(read_diff_mechanism({3, 4, 5}, {0, 1, 2, 3, 4, 5}, {}), "extra-before");
  EXPECT_EQ(read_diff_mechanism({3, 4, 5}, {3, 4, 5, 6}, {}), "extra-after");
  EXPECT_EQ(read_diff_mechanism({0, 1, 4}, {0, 1, 2, 4}, {}), "extra-interior");  // a non-ancestor draft
  EXPECT_EQ(read_diff_mechanism({3, 4, 5}, {3, 4, 4, 5}, {}), "read-twice");
}

TEST(ReadDiff, AVisibleSetMovedByAConstantIsAShift) {
  EXPECT_EQ(read_diff_mechanism({3, 4, 5}, {2, 3, 4}, {}), "shifted-older");
  EXPECT_EQ(read_diff_mechanism({0, 1, 2, 3}, {8, 9, 10, 11}, {}), "shifted-newer");
  // Not a shift: the set changed size.
  EXPECT_EQ(read_diff_mechanism({3, 4, 5}, {2, 3, 4, 5}, {}), "extra-before");
}

TEST(ReadDiff, ForeignReadsAreNamedByTheirWorstKindAlone) {
  // Where a misaddressed read lands decides which own keys are missing: not part of the name.
  EXPECT_EQ(read_diff_mechanism({3, 4, 5}, {4}, {"unowned-slot", "other-request", "unowned-slot"}), "other-request");
  EXPECT_EQ(read_diff_mechanism({3, 4, 5}, {3}, {"unowned-slot"}), read_diff_mechanism({3, 4, 5}, {4, 4}, {"unowned-slot"}));
  EXPECT_EQ(read_diff_mechanism({3, 4, 5}, {1, 3}, {"unowned-slot", "outside-pool"}), "outside-pool");
}

}  // namespace
}  // namespace kvfuzz
