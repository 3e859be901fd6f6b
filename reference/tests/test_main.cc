// GoogleTest main shared by every kvfuzz test binary: applies the test level (test_level.h).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "reference/tests/test_level.h"

namespace kvfuzz::testing {

int test_level() {
  const char* env = std::getenv("KVFUZZ_TEST_LEVEL");
  if (env == nullptr || *env == '\0') return 1;
  const int level = std::atoi(env);
  return level < 0 ? 0 : level;
}

int64_t test_cases(int64_t base) {
  const int level = test_level();
  if (level == 0) return base / 10 > 0 ? base / 10 : 1;
  int64_t n = base;
  for (int i = 1; i < level; ++i) n *= 10;
  return n;
}

}  // namespace kvfuzz::testing

int main(int argc, char** argv) {
  if (std::getenv("RC_PARAMS") == nullptr) {
    const std::string params = "max_success=" + std::to_string(kvfuzz::testing::test_cases(100));
    setenv("RC_PARAMS", params.c_str(), 0);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
