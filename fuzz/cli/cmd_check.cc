// kvfuzz check: runs every property of one or all backends on one case, or on several in turn, and
// reports findings. Several cases share the backends, so an adapter's process starts once for all.
//
//   kvfuzz check case.json --backend all     # exit 1 on a finding
//   kvfuzz check case.json --backend fa --fault fa_local_token_table --variant-seed 12
//   kvfuzz check a.json b.json --backend vllm_fa:fa --adapter "..."   # "== a.json" before each case's lines
#include <algorithm>
#include <iostream>
#include <map>

#include "backends/registry.h"
#include "fuzz/case_check.h"
#include "fuzz/cli/commands.h"
#include "fuzz/cli/options.h"
#include "fuzz/replay.h"
#include "properties/fingerprint.h"
#include "reference/case_error.h"
#include "reference/scenario_json.h"

namespace kvfuzz::cli {
namespace {

constexpr int kShownPerKey = 4;  // findings printed per fingerprint key; the rest are counted

// Checks one case and prints its lines; true when it has a finding.
bool check_one(const Scenario& s, const std::string& path, const std::vector<const Backend*>& backends,
               const std::string& backend, const std::vector<std::string>& faults, uint64_t variant_seed,
               const AdapterOptions& adapters) {
  const CaseReport report = check_all(s, backends, {faults, /*metamorphic=*/true, variant_seed});
  for (const std::string& u : report.unsupported) std::cout << "unsupported: " << u << "\n";
  for (const Finding& n : report.notes) std::cout << n.backend << ": note: " << n.property << ": " << n.message << "\n";
  for (const Backend* b : backends) {
    int n = 0;
    std::map<std::string, int> per_key;  // findings of each fingerprint key: the first few are shown
    for (const Finding& f : report.findings) {
      if (f.backend != b->name()) continue;
      ++n;
      const std::string key = fingerprint_of(s, f).key();
      if (++per_key[key] > kShownPerKey) continue;
      std::cout << b->name() << ": " << f.property << ": " << f.message << "\n  fingerprint: " << key << "\n";
    }
    for (const auto& [key, count] : per_key)
      if (count > kShownPerKey)
        std::cout << b->name() << ": " << count - kShownPerKey << " more finding(s) of " << key << " not shown\n";
    const bool unsupported = std::any_of(report.unsupported.begin(), report.unsupported.end(),
                                         [&](const std::string& u) { return u.rfind(std::string(b->name()) + ": ", 0) == 0; });
    if (n == 0 && !unsupported) std::cout << b->name() << ": ok (every property)\n";
  }
  if (report.findings.empty()) return false;
  std::cout << report.findings.size() << " finding(s); replay with: "
            << replay_command({path == "-" ? "CASE.json" : path, backend, faults, variant_seed, adapter_flags(adapters)}) << "\n";
  if (path == "-") std::cout << "(the case came from standard input: save it as CASE.json to replay it)\n";
  return true;
}

}  // namespace

void add_check(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("check",
                                 "Run every property on one case, or several in turn, and report what is wrong (exit 1 on a finding)");
  static std::vector<std::string> paths;
  static std::string backend = "all";
  static std::vector<std::string> faults;
  static uint64_t variant_seed = 0;
  cmd->add_option("case", paths, "Case file(s) (JSON), or - for standard input")->required();
  cmd->add_option("--backend", backend, "Backend name, or all")->capture_default_str();
  static AdapterOptions adapters;
  add_adapter_options(cmd, adapters);
  cmd->add_option("--fault", faults, "Switch on a named planner fault (see kvfuzz faults --list)");
  cmd->add_option("--variant-seed", variant_seed, "Seed of the metamorphic variants (a campaign report names it)")
      ->check(seed_check())
      ->capture_default_str();
  cmd->callback([&exit_code] {
    if (paths.size() > 1 && std::find(paths.begin(), paths.end(), "-") != paths.end())
      throw InvalidCase("check: standard input (-) can only be the one case: name the others as files");
    register_adapters(adapters);
    const auto backends = select_backends(backend);
    check_faults(faults, backends);
    std::vector<Scenario> cases;  // every case is read first: a bad file is named before any run
    for (const std::string& path : paths) cases.push_back(load_case(path));
    exit_code = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
      if (cases.size() > 1) std::cout << "== " << paths[i] << "\n";
      if (check_one(cases[i], paths[i], backends, backend, faults, variant_seed, adapters)) exit_code = 1;
    }
  });
}

}  // namespace kvfuzz::cli
