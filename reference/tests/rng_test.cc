// The counter-based RNG: bounded, deterministic, and its forks are independent streams.
#include <gtest/gtest.h>

#include <array>

#include "reference/rng.h"

namespace kvfuzz {
namespace {

TEST(Rng, BelowStaysInRange) {
  Rng rng(1);
  for (uint64_t n : {1ULL, 2ULL, 3ULL, 7ULL, 1000ULL, 1ULL << 40, ~0ULL}) {
    for (int i = 0; i < 1000; ++i) ASSERT_LT(rng.below(n), n);
  }
}

TEST(Rng, RangeIsInclusiveAndClampsEmptyRanges) {
  Rng rng(2);
  bool saw_lo = false, saw_hi = false;
  for (int i = 0; i < 1000; ++i) {
    const int64_t x = rng.range(-2, 2);
    ASSERT_GE(x, -2);
    ASSERT_LE(x, 2);
    saw_lo |= x == -2;
    saw_hi |= x == 2;
  }
  EXPECT_TRUE(saw_lo && saw_hi);
  EXPECT_EQ(rng.range(5, 3), 5);
}

TEST(Rng, BelowIsRoughlyUniform) {
  Rng rng(3);
  std::array<int, 10> counts{};
  const int n = 100000;
  for (int i = 0; i < n; ++i) counts[rng.below(10)]++;
  for (int c : counts) EXPECT_NEAR(c, n / 10, n / 100);  // ~10 standard deviations
}

TEST(Rng, SameSeedSameStreamAndForksDiffer) {
  Rng a(42), b(42);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a.next(), b.next());
  Rng c = a.fork("x"), d = a.fork("y");
  int same = 0;
  for (int i = 0; i < 100; ++i) same += c.next() == d.next();
  EXPECT_EQ(same, 0);
}

TEST(Rng, IsAConstantExpression) {
  // The same numbers at compile time prove no platform-dependent state is involved.
  constexpr uint64_t x = [] {
    Rng r(7);
    r.next();
    return r.below(1000);
  }();
  Rng r(7);
  r.next();
  EXPECT_EQ(r.below(1000), x);
}

}  // namespace
}  // namespace kvfuzz
