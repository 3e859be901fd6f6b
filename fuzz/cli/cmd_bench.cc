// kvfuzz bench: benchmarks that print ratios measured in the same run.
//
//   kvfuzz bench oracle [--isa avx2]
//   kvfuzz bench backends --cases 500 --profile small
//   kvfuzz bench adapter --adapter "python3 adapters/examples/numpy_page_table.py"
#include <iostream>

#include "backends/external/pair_backend.h"
#include "backends/registry.h"
#include "fuzz/adapter_bench.h"
#include "fuzz/backend_bench.h"
#include "fuzz/cli/commands.h"
#include "fuzz/cli/options.h"
#include "reference/case_error.h"
#include "reference/oracle_bench.h"
#include "reference/oracle_dispatch.h"

namespace kvfuzz::cli {

void add_bench(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("bench", "Benchmarks (throughput against this machine's measured limits)");
  cmd->require_subcommand(1);
  auto* oracle = cmd->add_subcommand("oracle", "Oracle GFLOP/s and bandwidth against fp64 FMA peak and memory bandwidth");
  static int threads = 0;
  static std::string isa;
  oracle->add_option("--threads", threads, "OpenMP threads (0: default)")->check(CLI::Range(0, 1024));
  oracle->add_option("--isa", isa,
                     "The oracle kernels' ISA: portable, avx2 or avx512 (default: the best this CPU runs)");
  oracle->callback([&exit_code] {
    if (!isa.empty()) {
      const std::optional<Isa> chosen = parse_isa(isa);
      if (!chosen || !cpu_runs(*chosen))
        throw InvalidCase("bench oracle --isa " + isa + ": " + (chosen ? "this CPU cannot run it" : "no such ISA") +
                          "; this CPU runs: " + runnable_isa_names());
      use_oracle_isa(*chosen);
    }
    exit_code = run_oracle_bench(std::cout, threads);
  });

  auto* backends = cmd->add_subcommand("backends", "Cases checked per second for each backend, on the same generated cases");
  static int64_t cases = 500;
  static std::string profile = "small";
  static uint64_t seed = 1;
  backends->add_option("--cases", cases, "Generated cases")->check(positive())->capture_default_str();
  backends->add_option("--profile", profile, "Size profile")->check(profile_check())->capture_default_str();
  backends->add_option("--seed", seed, "Seed")->check(seed_check())->capture_default_str();
  backends->callback([&exit_code] {
    print_backend_bench(run_backend_bench(all_backends(), *parse_profile(profile), cases, seed), std::cout);
    exit_code = 0;
  });

  auto* adapter = cmd->add_subcommand("adapter", "An external executor through its worker against its own time in process");
  static AdapterOptions adapters;
  static int64_t adapter_cases = 300;
  static std::string adapter_profile = "small";
  add_adapter_options(adapter, adapters);
  adapter->add_option("--cases", adapter_cases, "Generated cases")->check(positive())->capture_default_str();
  adapter->add_option("--profile", adapter_profile, "Size profile")->check(profile_check())->capture_default_str();
  adapter->callback([&exit_code] {
    if (adapters.commands.empty()) throw InvalidCase("bench adapter: give the executor with --adapter CMD");
    register_adapters(adapters);
    for (const Backend* b : all_backends()) {
      const auto* pair = dynamic_cast<const PairBackend*>(b);
      if (pair == nullptr || pair->external_executor() == nullptr) continue;
      print_adapter_bench(run_adapter_bench(*pair, *parse_profile(adapter_profile), adapter_cases, seed), std::cout);
    }
    exit_code = 0;
  });
}

}  // namespace kvfuzz::cli
