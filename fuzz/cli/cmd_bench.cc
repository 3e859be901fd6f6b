// kvfuzz bench: benchmarks that print ratios measured in the same run.
//
//   kvfuzz bench oracle
#include <iostream>

#include "fuzz/cli/commands.h"
#include "reference/oracle_bench.h"

namespace kvfuzz::cli {

void add_bench(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("bench", "Benchmarks (throughput against this machine's measured limits)");
  cmd->require_subcommand(1);
  auto* oracle = cmd->add_subcommand("oracle", "Oracle GFLOP/s and bandwidth against fp64 FMA peak and memory bandwidth");
  static int threads = 0;
  oracle->add_option("--threads", threads, "OpenMP threads (0: default)")->check(CLI::Range(0, 1024));
  oracle->callback([&exit_code] { exit_code = run_oracle_bench(std::cout, threads); });
}

}  // namespace kvfuzz::cli
