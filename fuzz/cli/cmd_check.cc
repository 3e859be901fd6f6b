// kvfuzz check: runs every property of one or all backends on one case and reports findings.
//
//   kvfuzz check case.json --backend all     # exit 1 on a finding
#include <iostream>

#include "backends/registry.h"
#include "fuzz/cli/commands.h"
#include "properties/check.h"
#include "reference/case_error.h"
#include "reference/scenario_json.h"

namespace kvfuzz::cli {

std::vector<const Backend*> select_backends(const std::string& name) {
  if (name == "all") return all_backends();
  if (const Backend* b = find_backend(name)) return {b};
  std::string known;
  for (const Backend* b : all_backends()) known += (known.empty() ? "" : ", ") + std::string(b->name());
  throw InvalidCase("--backend: unknown backend '" + name + "' (known: " + known + ", all)");
}

void add_check(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("check", "Run every property on one case and report what is wrong (exit 1 on a finding)");
  static std::string path, backend = "all";
  static std::vector<std::string> faults;
  cmd->add_option("case", path, "Case file (JSON), or - for standard input")->required();
  cmd->add_option("--backend", backend, "Backend name, or all")->capture_default_str();
  cmd->add_option("--fault", faults, "Switch on a named planner fault (see kvfuzz faults --list)");
  cmd->callback([&exit_code] {
    const auto backends = select_backends(backend);
    const Scenario s = load_case(path);
    const CaseContext ctx(s, 0);
    int findings = 0;
    for (const Backend* b : backends) {
      const CheckResult r = check_case(ctx, *b, faults);
      if (!r.support.ok) {
        std::cout << b->name() << ": unsupported: " << r.support.why << "\n";
        continue;
      }
      if (r.findings.empty()) std::cout << b->name() << ": ok\n";
      for (const Finding& f : r.findings) {
        std::cout << b->name() << ": " << f.property << ": " << f.message << "\n";
        ++findings;
      }
    }
    if (findings > 0) std::cout << findings << " finding(s); replay with: kvfuzz check " << path << " --backend " << backend << "\n";
    exit_code = findings > 0 ? 1 : 0;
  });
}

}  // namespace kvfuzz::cli
