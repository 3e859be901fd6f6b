// libFuzzer target: the case parser. Any bytes give a clean InvalidCase or a valid case, never a
// crash, and every valid case round-trips exactly.
//
//   build-fuzz/fuzz/targets/case_parser_fuzzer corpus/case_parser
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string_view>

#include "reference/case_error.h"
#include "reference/scenario_json.h"
#include "reference/validate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kvfuzz::Scenario s;
  try {
    s = kvfuzz::scenario_from_json(text);
    kvfuzz::validate(s);
  } catch (const kvfuzz::InvalidCase&) {
    return 0;  // rejected cleanly
  }
  const std::string once = kvfuzz::to_json(s);
  const kvfuzz::Scenario back = kvfuzz::scenario_from_json(once);
  if (!(back == s) || kvfuzz::to_json(back) != once) {
    std::cerr << "round trip changed the case:\n" << once;
    std::abort();
  }
  return 0;
}
