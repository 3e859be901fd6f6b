// kvfuzz merge: the folders of a sharded campaign's parts joined into one campaign folder.
//
//   kvfuzz run --cases 4000 --seed 7 --shard 0/2 --out s0    # on one machine
//   kvfuzz run --cases 4000 --seed 7 --shard 1/2 --out s1    # on another
//   kvfuzz merge merged s0 s1                                # then triage.py / kvfuzz report merged
#include <iostream>

#include "fuzz/campaign_merge.h"
#include "fuzz/cli/commands.h"

namespace kvfuzz::cli {

void add_merge(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "merge",
      "Join the folders of a sharded campaign (kvfuzz run --shard I/N) into one campaign folder (exit 2 on bad input)");
  static std::string out;
  static std::vector<std::string> dirs;
  cmd->add_option("OUT", out, "The merged campaign's folder (new, or empty)")->required();
  cmd->add_option("DIR", dirs, "Every shard's --out folder, each once")->required();
  cmd->callback([&exit_code] {
    print_merge(merge_campaigns(out, dirs), std::cout);
    exit_code = 0;
  });
}

}  // namespace kvfuzz::cli
