// kvfuzz explain: for each failing query, which key positions it should have read and which it
// did, with page boundaries marked — as text and as an SVG picture.
//
// Where it sits: the last step of triage, after shrinking. It reruns the backend on the case and
// lays the expected and the read columns of each failing query side by side.
//
//   Explanation e = explain(scenario, *find_backend("fa"), {});
//   std::cout << e.text;  write_file_atomic("case.svg", e.svg);
#pragma once

#include <string>
#include <vector>

#include "backends/backend.h"
#include "reference/scenario.h"

namespace kvfuzz {

struct Explanation {
  std::string text;
  std::string svg;
  int findings = 0;
};

Explanation explain(const Scenario& s, const Backend& backend, const std::vector<std::string>& faults, int max_queries = 8);

}  // namespace kvfuzz
