// kvfuzz: checks paged KV-cache attention backends against an exact oracle.
//
//   kvfuzz run --seconds 600              # the fuzz campaign
//   kvfuzz merge merged shard-0 shard-1   # the shards of one (kvfuzz run --shard I/N)
//   kvfuzz gen --seed 7 --profile small > case.json
//   kvfuzz check case.json --backend all
//   kvfuzz report findings -o findings/report.html
#include <filesystem>
#include <iostream>

#include "backends/common/harness_error.h"
#include "fuzz/cli/commands.h"
#include "fuzz/replay.h"
#include "reference/case_error.h"

int main(int argc, char** argv) {
  // Replay lines name this binary by its absolute path: they run pasted anywhere (fuzz/replay.h).
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) kvfuzz::set_replay_program(self.string());
  CLI::App app{"kvfuzz: fuzzes paged KV-cache attention metadata against an exact CPU oracle"};
  app.require_subcommand(1);
  int exit_code = 0;
  kvfuzz::cli::add_gen(app, exit_code);
  kvfuzz::cli::add_oracle(app, exit_code);
  kvfuzz::cli::add_backends(app, exit_code);
  kvfuzz::cli::add_check(app, exit_code);
  kvfuzz::cli::add_run(app, exit_code);
  kvfuzz::cli::add_merge(app, exit_code);
  kvfuzz::cli::add_shrink(app, exit_code);
  kvfuzz::cli::add_explain(app, exit_code);
  kvfuzz::cli::add_faults(app, exit_code);
  kvfuzz::cli::add_fingerprint(app, exit_code);
  kvfuzz::cli::add_repro(app, exit_code);
  kvfuzz::cli::add_bench(app, exit_code);
  kvfuzz::cli::add_report(app, exit_code);
  kvfuzz::cli::add_bisect(app, exit_code);
  bool known = argc < 2 || argv[1][0] == '-';
  for (const CLI::App* sub : app.get_subcommands({})) known |= argc > 1 && sub->get_name() == argv[1];
  if (!known) {
    std::cerr << "kvfuzz: unknown command '" << argv[1] << "'\n(run 'kvfuzz --help' for the commands)\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "kvfuzz: " << e.what() << "\n(run 'kvfuzz --help' for usage)\n";
    return 2;
  } catch (const kvfuzz::InvalidCase& e) {
    std::cerr << "kvfuzz: " << e.what() << "\n";
    return 2;
  } catch (const kvfuzz::HarnessError& e) {  // a bug in kvfuzz itself, neither a finding nor bad input
    std::cerr << "kvfuzz: " << e.what() << "\n(a bug in kvfuzz's checking code, not in the backend)\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "kvfuzz: error: " << e.what() << "\n";
    return 2;
  }
  return exit_code;
}
