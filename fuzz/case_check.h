// Every property of one case for a set of backends: what campaigns, the shrinker, the fault
// benchmark and the fuzz targets all run.
//
// Where it sits: the top of the data flow, over properties/check.h and properties/metamorphic.h.
// The oracle runs once per case and is shared by all backends.
//
//   CaseReport r = check_all(scenario, backends, {.faults = {"fa_local_token_table"}, .metamorphic = true});
//   for (const Finding& f : r.findings) ...
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "properties/finding.h"
#include "properties/metamorphic.h"
#include "reference/scenario.h"

namespace kvfuzz {

struct CheckOptions {
  std::vector<std::string> faults;  // applied to the backends that declare them
  bool metamorphic = false;         // also run the metamorphic variants (about 6 more runs)
  uint64_t variant_seed = 0;
};

struct CaseReport {
  std::vector<Finding> findings;
  std::vector<Finding> notes;  // information, not failures
  std::vector<std::string> unsupported;  // "backend: why"
  int32_t backends_run = 0;
  VariantTallies variants;               // metamorphic variants run and dropped, all backends
};

// Throws InvalidCase for a scenario that does not validate.
CaseReport check_all(const Scenario& s, const std::vector<const Backend*>& backends, const CheckOptions& options);

// The faults of `options` that `backend` declares.
std::vector<std::string> faults_for(const Backend& backend, const std::vector<std::string>& faults);

}  // namespace kvfuzz
