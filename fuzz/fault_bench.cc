#include "fuzz/fault_bench.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>

#include "fuzz/campaign.h"
#include "fuzz/case_check.h"
#include "fuzz/regression_property.h"
#include "fuzz/replay.h"
#include "fuzz/shrink.h"
#include "reference/generate.h"
#include "reference/io.h"
#include "reference/rng.h"
#include "reference/scenario_json.h"

namespace kvfuzz {
namespace {

using Clock = std::chrono::steady_clock;

FaultResult bench_one(const Backend& b, const std::string& fault, const FaultBenchOptions& o, std::ostream& progress) {
  FaultResult r;
  r.backend = std::string(b.name());
  r.fault = fault;
  const auto start = Clock::now();
  const uint64_t seed = hash_words(o.seed, hash_tag(fault));
  std::vector<Profile> profiles = default_profiles();
  for (const FaultInfo& info : b.faults())  // the workloads that reach it (FaultInfo::profile)
    if (info.name == fault && !info.profile.empty()) profiles = {parse_profile(info.profile).value()};
  // Only cases the backend supports count against the budget; generating stops at 20 times it.
  for (int64_t i = 0; r.cases < o.budget && i < 20 * o.budget && !r.detected; ++i) {
    const Scenario s = generate(campaign_case_seed(seed, i), profiles[static_cast<size_t>(i) % profiles.size()]);
    const CaseReport with = check_all(s, {&b}, {{fault}, i % 4 == 0, 0});
    if (with.backends_run == 0) {
      ++r.unsupported;
      continue;
    }
    ++r.cases;
    if (with.findings.empty()) continue;
    r.detected = true;
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    // Shrink while a general property fails when one does (what the regression case records).
    const auto general = std::find_if(with.findings.begin(), with.findings.end(),
                                      [](const Finding& f) { return is_general_property(f.property); });
    const Finding& first = general != with.findings.end() ? *general : with.findings.front();
    r.property = first.property;
    r.clean_without_fault = check_all(s, {&b}, {{}, i % 4 == 0, 0}).findings.empty();
    const bool meta = first.needs_variants();
    const ShrinkResult shrunk = shrink(s, {first.signature(), &b, {fault}, meta}, {o.shrink_seconds, 5000});
    r.shrunk = case_size(shrunk.scenario);
    r.shrink_seconds = shrunk.seconds;
    r.clean_without_fault = r.clean_without_fault && check_all(shrunk.scenario, {&b}, {{}, meta, 0}).findings.empty();
    if (!o.out_dir.empty()) {
      r.file = o.out_dir + "/" + std::string(b.name()) + "__" + fault + ".json";
      write_file_atomic(r.file, to_json(shrunk.scenario));
      if (is_general_property(r.property)) write_regression_property(r.file, r.property);
    }
  }
  if (r.detected && !is_general_property(r.property))
    progress << "  " << fault << ": caught only by " << r.property << ", a backend's own check: no general property\n";
  if (!r.detected) r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  progress << "  " << std::left << std::setw(36) << fault << (r.detected ? "detected after " + std::to_string(r.cases) + " cases"
                                                                          : "NOT detected in " + std::to_string(r.cases) + " cases")
           << "\n"
           << std::flush;
  return r;
}

}  // namespace

std::vector<FaultResult> run_fault_bench(const FaultBenchOptions& o, std::ostream& progress) {
  if (!o.out_dir.empty()) std::filesystem::create_directories(o.out_dir);
  std::vector<FaultResult> results;
  for (const Backend* b : o.backends) {
    for (const FaultInfo& f : b->faults()) {
      if (!o.only.empty() && std::find(o.only.begin(), o.only.end(), f.name) == o.only.end()) continue;
      results.push_back(bench_one(*b, f.name, o, progress));
    }
  }
  return results;
}

void print_fault_table(const std::vector<FaultResult>& results, std::ostream& out) {
  out << std::left << std::setw(36) << "fault" << std::setw(18) << "backend" << std::right << std::setw(8) << "cases"
      << std::setw(10) << "seconds"
      << "  " << std::left << std::setw(14) << "property" << std::right << std::setw(10) << "requests" << std::setw(12)
      << "max tokens" << std::setw(8) << "clean" << std::setw(13) << "unsupported"
      << "\n";
  for (const FaultResult& r : results) {
    out << std::left << std::setw(36) << r.fault << std::setw(18) << r.backend << std::right << std::setw(8)
        << (r.detected ? std::to_string(r.cases) : "-") << std::setw(10) << std::fixed << std::setprecision(2)
        << r.seconds << "  " << std::left << std::setw(14) << (r.detected ? r.property : "SURVIVED") << std::right
        << std::setw(10) << (r.detected ? std::to_string(r.shrunk.requests) : "-") << std::setw(12)
        << (r.detected ? std::to_string(r.shrunk.max_tokens) : "-") << std::setw(8)
        << (r.detected ? (r.clean_without_fault ? "yes" : "NO") : "-") << std::setw(13) << r.unsupported << "\n";
  }
  for (const FaultResult& r : results)  // the shrunk cases were checked with variant seed 0
    if (!r.file.empty()) out << "replay: " << replay_command({r.file, r.backend, {r.fault}, 0, {}}) << "\n";
}

}  // namespace kvfuzz
