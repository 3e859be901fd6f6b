// kvfuzz-worker's guarded buffers (backends/external/worker/guarded_buffer.h): which writes of an
// executor library they report, and that they name the array.
#include <gtest/gtest.h>

#include "backends/external/worker/guarded_buffer.h"

namespace kvfuzz::worker {
namespace {

bool mentions(const std::vector<std::string>& v, const std::string& text) {
  for (const std::string& s : v)
    if (s.find(text) != std::string::npos) return true;
  return false;
}

TEST(GuardedBuffer, AnUntouchedInputHasNoViolations) {
  GuardedBuffer q("q", std::vector<unsigned char>{1, 2, 3, 4});
  EXPECT_EQ(q.size(), 4u);
  EXPECT_EQ(q.data()[2], 3);
  EXPECT_TRUE(q.violations().empty());
}

TEST(GuardedBuffer, ReportsWritesBeforeAndPastTheArray) {
  GuardedBuffer a("k_cache.0", std::vector<unsigned char>(8, 0));
  a.data()[-1] = 0;
  EXPECT_TRUE(mentions(a.violations(), "k_cache.0: the guard zone before the array was overwritten"));
  GuardedBuffer b("out", 16, 0xff);
  b.data()[16 + kGuardBytes - 1] = 0;  // the last guard byte
  const auto found = b.violations();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0], "out: the guard zone after the array was overwritten");
}

TEST(GuardedBuffer, ReportsAWrittenInputButNotAWrittenOutput) {
  GuardedBuffer in("page_table", std::vector<unsigned char>(12, 7));
  in.data()[5] = 8;
  in.data()[6] = 9;
  EXPECT_TRUE(mentions(in.violations(), "page_table: an input was written (2 bytes changed)"));
  GuardedBuffer out("lse", 12, 0xff);
  for (size_t i = 0; i < out.size(); ++i) out.data()[i] = 0;
  EXPECT_TRUE(out.violations().empty());
}

TEST(GuardedBuffer, AnEmptyArrayStillHasGuards) {
  GuardedBuffer e("custom_mask", std::vector<unsigned char>{});
  EXPECT_TRUE(e.violations().empty());
  e.data()[0] = 0;  // the first byte after an empty array is a guard byte
  EXPECT_TRUE(mentions(e.violations(), "after the array"));
}

}  // namespace
}  // namespace kvfuzz::worker
