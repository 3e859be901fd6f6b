// kvfuzz faults: the fault benchmark — cases and seconds until each named planner fault is
// detected, and its shrunk size. Exit 1 if any fault survives its budget.
//
//   kvfuzz faults                      # every fault of every backend
//   kvfuzz faults --list
//   kvfuzz faults --only fa_local_token_table --out corpus/regressions
//   kvfuzz faults --groups 300          # root-cause groups per fault in a 300-case tiny campaign
#include <iostream>

#include "fuzz/cli/commands.h"
#include "fuzz/cli/options.h"
#include "fuzz/fault_bench.h"
#include "fuzz/fault_groups.h"

namespace kvfuzz::cli {

void add_faults(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("faults", "Measure how fast the suite catches each named planner fault (exit 1 if one survives)");
  static std::string backend = "all", out;
  static std::vector<std::string> only;
  static int64_t budget = 2000;
  static uint64_t seed = 1;
  static double shrink_seconds = 30;
  static bool list = false;
  static int64_t groups_cases = 0;
  static size_t max_groups = 3;
  cmd->add_option("--backend", backend, "Backend name, or all")->capture_default_str();
  static AdapterOptions adapters;
  add_adapter_options(cmd, adapters);
  cmd->add_option("--only", only, "Only these faults");
  cmd->add_option("--budget", budget, "Cases per fault before it counts as surviving")->check(positive())->capture_default_str();
  cmd->add_option("--seed", seed, "Seed")->check(seed_check())->capture_default_str();
  cmd->add_option("--shrink-seconds", shrink_seconds, "Time to shrink each detecting case")->capture_default_str();
  cmd->add_option("--out", out, "Save each shrunk case here as <backend>__<fault>.json");
  cmd->add_flag("--list", list, "List the faults and exit");
  cmd->add_option("--groups", groups_cases,
                  "Instead: a campaign of this many tiny cases per fault (or of the profile a fault names); print its fingerprint keys and root-cause "
                  "groups (exit 1 if a fault has more than --max-groups, or two faults share a group)")
      ->check(positive());
  cmd->add_option("--max-groups", max_groups, "With --groups: the most root-cause groups one fault may give")
      ->check(positive())
      ->capture_default_str();
  cmd->callback([&exit_code] {
    register_adapters(adapters);
    const auto backends = select_backends(backend);
    check_faults(only, backends);
    if (list) {
      for (const Backend* b : backends)
        for (const FaultInfo& f : b->faults()) std::cout << b->name() << "  " << f.name << "\n    " << f.description << "\n";
      exit_code = 0;
      return;
    }
    if (groups_cases > 0) {
      std::cerr << "kvfuzz faults --groups: " << groups_cases << " tiny cases per fault (a fault's own profile where it names one)\n";
      const auto rows = run_fault_groups({groups_cases, seed, backends, only, 2}, std::cerr);
      exit_code = print_fault_groups(rows, max_groups, std::cout) ? 0 : 1;
      return;
    }
    FaultBenchOptions o{budget, seed, shrink_seconds, out, backends, only};
    std::cerr << "kvfuzz faults: budget " << budget << " cases per fault\n";
    const auto results = run_fault_bench(o, std::cerr);
    print_fault_table(results, std::cout);
    bool survived = false, unclean = false;
    for (const FaultResult& r : results) {
      survived |= !r.detected;
      unclean |= r.detected && !r.clean_without_fault;
    }
    if (unclean) std::cout << "a detecting case also fails with the fault off: the suite (or the backend) is wrong\n";
    exit_code = survived || unclean ? 1 : 0;
  });
}

}  // namespace kvfuzz::cli
