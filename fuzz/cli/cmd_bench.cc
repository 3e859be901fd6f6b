// kvfuzz bench: benchmarks that print ratios measured in the same run.
//
//   kvfuzz bench oracle
//   kvfuzz bench backends --cases 500 --profile small
#include <iostream>

#include "backends/registry.h"
#include "fuzz/backend_bench.h"
#include "fuzz/cli/commands.h"
#include "fuzz/cli/options.h"
#include "reference/oracle_bench.h"

namespace kvfuzz::cli {

void add_bench(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("bench", "Benchmarks (throughput against this machine's measured limits)");
  cmd->require_subcommand(1);
  auto* oracle = cmd->add_subcommand("oracle", "Oracle GFLOP/s and bandwidth against fp64 FMA peak and memory bandwidth");
  static int threads = 0;
  oracle->add_option("--threads", threads, "OpenMP threads (0: default)")->check(CLI::Range(0, 1024));
  oracle->callback([&exit_code] { exit_code = run_oracle_bench(std::cout, threads); });

  auto* backends = cmd->add_subcommand("backends", "Cases checked per second for each backend, on the same generated cases");
  static int64_t cases = 500;
  static std::string profile = "small";
  static uint64_t seed = 1;
  backends->add_option("--cases", cases, "Generated cases")->check(positive())->capture_default_str();
  backends->add_option("--profile", profile, "Size profile")->check(CLI::IsMember({"tiny", "small", "medium", "large"}))->capture_default_str();
  backends->add_option("--seed", seed, "Seed")->check(seed_check())->capture_default_str();
  backends->callback([&exit_code] {
    print_backend_bench(run_backend_bench(all_backends(), *parse_profile(profile), cases, seed), std::cout);
    exit_code = 0;
  });
}

}  // namespace kvfuzz::cli
