// kvfuzz oracle: runs the exact oracle on a case and prints a short summary.
//
//   kvfuzz oracle case.json          # "-" reads standard input
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "fuzz/cli/commands.h"
#include "reference/logical.h"
#include "reference/oracle.h"
#include "reference/oracle_dispatch.h"
#include "reference/scenario_json.h"

namespace kvfuzz::cli {

void add_oracle(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("oracle", "Run the exact oracle on a case file and summarize what it computed");
  static std::string path;
  static int threads = 0;
  cmd->add_option("case", path, "Case file (JSON), or - for standard input")->required();
  cmd->add_option("--threads", threads, "OpenMP threads (0: default)")->check(CLI::Range(0, 1024));
  cmd->callback([&exit_code] {
    const Scenario s = load_case(path);
    const auto t0 = std::chrono::steady_clock::now();
    const LogicalBatch lb = derive_logical(s);
    const OracleResult r = run_oracle(s, lb, ValueSource(s), threads);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int64_t keys = 0;
    for (const Layer& layer : s.model.layers) {
      for (const LogicalRow& row : lb.rows) {
        for (size_t q = 0; q < row.queries.size(); ++q) {
          for (const ColumnRange& cr : visible(layer, row, static_cast<int32_t>(q))) keys += cr.end - cr.begin;
        }
      }
    }
    double norm = 0.0;
    int64_t masked = 0;
    for (double x : r.out) norm += x * x;
    for (double l : r.lse) masked += std::isinf(l) ? 1 : 0;
    std::printf("mode %s: %zu rows, %lld queries, %d layers, %d q heads\n", to_string(s.batch.mode).c_str(),
                lb.rows.size(), static_cast<long long>(r.num_queries), r.layers, r.q_heads);
    std::printf("visible (query, key) pairs: %lld per head; fully masked rows: %lld\n", static_cast<long long>(keys),
                static_cast<long long>(masked));
    std::printf("output norm %.17g\n", std::sqrt(norm));
    std::printf("oracle time %.3f s (%s kernels)\n", secs, oracle_kernels().name);
    exit_code = 0;
  });
}

}  // namespace kvfuzz::cli
