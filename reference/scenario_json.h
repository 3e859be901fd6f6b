// Case files: a Scenario as versioned JSON, and back, exactly.
//
// Where it sits: the one serializer of Scenario. Writing is canonical (fields in a fixed order,
// only the fields an op, layer or mode uses), so a valid scenario round-trips byte for byte:
// to_json(scenario_from_json(to_json(s))) == to_json(s). Reading checks types and structure and
// names the field that is wrong; what values are allowed is validate()'s business.
//
//   Scenario s = load_case("case.json");        // "-" reads standard input
//   std::cout << to_json(s);
#pragma once

#include <string>
#include <string_view>

#include "reference/scenario.h"

namespace kvfuzz {

std::string to_json(const Scenario& s);

// Throws InvalidCase for text that is not a case: bad JSON, wrong types, missing or unknown
// fields, nesting deeper than any case needs. Does not validate (call validate()).
Scenario scenario_from_json(std::string_view text);

// Reads a file ("-": standard input), parses and validates it. Throws InvalidCase.
Scenario load_case(const std::string& path);

}  // namespace kvfuzz
