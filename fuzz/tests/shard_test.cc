// Shards' cases (fuzz/shard.h): every case once across the shards, every profile in each shard.
#include <gtest/gtest.h>

#include <set>

#include "fuzz/shard.h"

namespace kvfuzz {
namespace {

TEST(Shard, EachCaseOnceAndEveryProfileInEveryShard) {
  for (int64_t count = 1; count <= 5; ++count)
    for (int64_t block = 1; block <= 4; ++block) {
      const int64_t cases = 240;
      std::multiset<int64_t> seen;
      for (int64_t index = 0; index < count; ++index) {
        const ShardRule rule{index, count, block};
        std::set<int64_t> profiles;
        int64_t last = -1;
        for (int64_t k = 0;; ++k) {
          const int64_t i = rule.case_at(k);
          if (i >= cases) break;
          EXPECT_GT(i, last) << "increasing";
          last = i;
          EXPECT_TRUE(rule.owns(i));
          EXPECT_EQ(rule.first_at_or_after(i), k);
          seen.insert(i);
          profiles.insert(i % block);  // run_case: case i's profile is i mod the profiles
        }
        EXPECT_EQ(static_cast<int64_t>(profiles.size()), block) << index << "/" << count << " block " << block;
        for (int64_t i = 0; i < cases; ++i) {  // its first case at or after any case
          const int64_t first = rule.case_at(rule.first_at_or_after(i));
          EXPECT_GE(first, i);
          for (int64_t between = i; between < first; ++between) EXPECT_FALSE(rule.owns(between));
        }
      }
      ASSERT_EQ(static_cast<int64_t>(seen.size()), cases);
      for (int64_t i = 0; i < cases; ++i) EXPECT_EQ(seen.count(i), 1u) << "case " << i;
    }
  // One shard: every case in order; block 1: the rule before (i mod N).
  EXPECT_EQ((ShardRule{0, 1, 3}.case_at(7)), 7);
  EXPECT_EQ((ShardRule{1, 3, 1}.case_at(2)), 7);
  EXPECT_EQ((ShardRule{1, 3, 2}.case_at(2)), 8);  // shard 1 of 3, two profiles: 2, 3, 8, 9, ...
}

}  // namespace
}  // namespace kvfuzz
