// The general property a regression case must be caught by, kept next to the case.
//
// Where it sits: corpus/regressions/ holds <name>.json and <name>.property; `kvfuzz faults --out`
// writes both, and fuzz/tests/regressions_test.cc checks that this exact property fires (for a
// fault case, with its fault on). A general property is one every backend is checked by
// (in-bounds, stride-divide, cache-extent, oracle, metamorphic, replay, crash) — never
// `metadata`, whose checks are a backend's own and may be written for one fault.
//
//   write_regression_property("corpus/regressions/fa__fa_local_token_table.json", "stride-divide");
//   std::string p = read_regression_property("corpus/regressions/fa__fa_local_token_table.json");
#pragma once

#include <string>

namespace kvfuzz {

bool is_general_property(const std::string& property);

// "dir/name.json" -> "dir/name.property".
std::string regression_property_path(const std::string& case_path);

// The recorded property, trimmed; throws InvalidCase naming the file when it is missing, empty or
// not a general property.
std::string read_regression_property(const std::string& case_path);

void write_regression_property(const std::string& case_path, const std::string& property);

}  // namespace kvfuzz
