// What a structure-aware target does with a case's findings: print each with the case and abort,
// so that libFuzzer keeps the input as a crash file (`kvfuzz check <crash file>` replays it).
#pragma once

#include <cstdlib>
#include <iostream>

#include "fuzz/case_check.h"
#include "reference/scenario_json.h"

namespace kvfuzz {

inline void abort_on_findings(const Scenario& s, const CaseReport& r) {
  if (r.findings.empty()) return;
  for (const Finding& f : r.findings) std::cerr << f.backend << ": " << f.property << ": " << f.message << "\n";
  std::cerr << to_json(s);
  std::abort();
}

}  // namespace kvfuzz
