// The subcommands of the kvfuzz command line, one file each.
//
// Where it sits: the top of the data flow. Each add_* registers a subcommand on the CLI11 app and
// sets `exit_code` when it runs: 0 fine, 1 a finding, 2 bad input or usage (main.cc maps every
// InvalidCase and usage error to 2).
#pragma once

#include <CLI/CLI.hpp>

namespace kvfuzz::cli {

void add_gen(CLI::App& app, int& exit_code);
void add_oracle(CLI::App& app, int& exit_code);
void add_bench(CLI::App& app, int& exit_code);
void add_backends(CLI::App& app, int& exit_code);
void add_check(CLI::App& app, int& exit_code);
void add_run(CLI::App& app, int& exit_code);
void add_merge(CLI::App& app, int& exit_code);
void add_shrink(CLI::App& app, int& exit_code);
void add_explain(CLI::App& app, int& exit_code);
void add_faults(CLI::App& app, int& exit_code);
void add_fingerprint(CLI::App& app, int& exit_code);
void add_report(CLI::App& app, int& exit_code);
void add_repro(CLI::App& app, int& exit_code);
void add_bisect(CLI::App& app, int& exit_code);

}  // namespace kvfuzz::cli
