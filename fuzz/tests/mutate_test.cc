// The structure-aware mutator keeps cases valid and really changes them; any bytes decode.
#include <gtest/gtest.h>

#include "fuzz/mutate.h"
#include "reference/generate.h"
#include "reference/scenario_json.h"
#include "reference/tests/test_level.h"
#include "reference/validate.h"

namespace kvfuzz {
namespace {

TEST(Mutate, KeepsCasesValidAndChangesThem) {
  int changed = 0, total = 0;
  for (uint64_t seed = 0; seed < static_cast<uint64_t>(testing::test_cases(100)); ++seed) {
    Scenario s = generate(seed, Profile::tiny);
    Rng rng(seed);
    for (int i = 0; i < 10; ++i) {
      const Scenario before = s;
      mutate(s, rng);
      ASSERT_NO_THROW(validate(s)) << to_json(s);
      changed += !(s == before);
      ++total;
    }
  }
  EXPECT_GT(changed, total * 3 / 4);
}

TEST(Mutate, AnyBytesDecodeToAValidCase) {
  const std::string garbage = "{\"version\": 1, \"model\": [";
  const Scenario s = decode_case(reinterpret_cast<const uint8_t*>(garbage.data()), garbage.size());
  EXPECT_NO_THROW(validate(s));
  const std::string text = to_json(generate(3, Profile::tiny));
  EXPECT_EQ(decode_case(reinterpret_cast<const uint8_t*>(text.data()), text.size()), generate(3, Profile::tiny));
}

}  // namespace
}  // namespace kvfuzz
