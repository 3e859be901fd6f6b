#include "fuzz/case_check.h"

#include <algorithm>

#include "properties/check.h"
#include "properties/metamorphic.h"

namespace kvfuzz {

std::vector<std::string> faults_for(const Backend& backend, const std::vector<std::string>& faults) {
  std::vector<std::string> out;
  for (const FaultInfo& f : backend.faults()) {
    if (std::find(faults.begin(), faults.end(), f.name) != faults.end()) out.push_back(f.name);
  }
  return out;
}

CaseReport check_all(const Scenario& s, const std::vector<const Backend*>& backends, const CheckOptions& options) {
  CaseReport report;
  const CaseContext ctx(s);
  for (const Backend* b : backends) {
    const std::vector<std::string> faults = faults_for(*b, options.faults);
    BackendRun run = run_backend(ctx, *b, faults, /*lenient=*/false, /*read_probes=*/true);
    if (!run.support.ok) {
      report.unsupported.push_back(std::string(b->name()) + ": " + run.support.why);
      continue;
    }
    ++report.backends_run;
    CheckResult checked = check_run(ctx, *b, run);
    std::vector<Finding> found = std::move(checked.findings);
    for (Finding& n : checked.notes) report.notes.push_back(std::move(n));
    if (options.metamorphic && found.empty()) {
      for (Finding& f : check_metamorphic(ctx, run, *b, faults, options.variant_seed, &report.variants))
        found.push_back(std::move(f));
    }
    for (Finding& f : found) report.findings.push_back(std::move(f));
  }
  return report;
}

}  // namespace kvfuzz
