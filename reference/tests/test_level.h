// The one knob that scales how many cases the tests run.
//
// KVFUZZ_TEST_LEVEL=0 is a quick local run, 1 (the default) is CI, 2 and up are long soak runs.
// RapidCheck properties get it through RC_PARAMS=max_success=N, set by test_main.cc unless the
// caller set RC_PARAMS already.
//
//   for (uint64_t seed = 0; seed < test_cases(200); ++seed) ...
#pragma once

#include <cstdint>

namespace kvfuzz::testing {

int test_level();

// `base` cases at level 1, a tenth (at least one) at level 0, base * 10^(level-1) above.
int64_t test_cases(int64_t base);

}  // namespace kvfuzz::testing
