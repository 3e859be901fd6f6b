// kvfuzz gen: prints one generated case as JSON.
//
//   kvfuzz gen --seed 7 --profile small > case.json
#include <iostream>

#include "fuzz/cli/commands.h"
#include "fuzz/cli/options.h"
#include "reference/generate.h"
#include "reference/scenario_json.h"

namespace kvfuzz::cli {

void add_gen(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("gen", "Print a generated case as JSON (the same seed gives the same bytes everywhere)");
  static uint64_t seed = 0;
  static std::string profile = "small";
  cmd->add_option("--seed", seed, "Seed of the case")->check(seed_check())->capture_default_str();
  cmd->add_option("--profile", profile, "Size profile")->check(profile_check())->capture_default_str();
  cmd->callback([&exit_code] {
    std::cout << to_json(generate(seed, *parse_profile(profile)));
    exit_code = 0;
  });
}

}  // namespace kvfuzz::cli
