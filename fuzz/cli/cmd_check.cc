// kvfuzz check: runs every property of one or all backends on one case and reports findings.
//
//   kvfuzz check case.json --backend all     # exit 1 on a finding
//   kvfuzz check case.json --backend fa --fault fa_local_token_table --variant-seed 12
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

}  // namespace

void add_check(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("check", "Run every property on one case and report what is wrong (exit 1 on a finding)");
  static std::string path, backend = "all";
  static std::vector<std::string> faults;
  static uint64_t variant_seed = 0;
  cmd->add_option("case", path, "Case file (JSON), or - for standard input")->required();
  cmd->add_option("--backend", backend, "Backend name, or all")->capture_default_str();
  static AdapterOptions adapters;
  add_adapter_options(cmd, adapters);
  cmd->add_option("--fault", faults, "Switch on a named planner fault (see kvfuzz faults --list)");
  cmd->add_option("--variant-seed", variant_seed, "Seed of the metamorphic variants (a campaign report names it)")
      ->check(seed_check())
      ->capture_default_str();
  cmd->callback([&exit_code] {
    register_adapters(adapters);
    const auto backends = select_backends(backend);
    check_faults(faults, backends);
    const Scenario s = load_case(path);
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
    if (!report.findings.empty()) {
      std::cout << report.findings.size() << " finding(s); replay with: "
                << replay_command({path == "-" ? "CASE.json" : path, backend, faults, variant_seed, adapter_flags(adapters)}) << "\n";
      if (path == "-") std::cout << "(the case came from standard input: save it as CASE.json to replay it)\n";
    }
    exit_code = report.findings.empty() ? 0 : 1;
  });
}

}  // namespace kvfuzz::cli
