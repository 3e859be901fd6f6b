// kvfuzz gen: prints one generated case as JSON.
//
//   kvfuzz gen --seed 7 --profile small > case.json
//   kvfuzz gen --seed 7 --shape 11 --profile small > case.json   # case 7's workload on shape 11
//                                                                  # (a campaign's --reuse-shapes)
#include <iostream>
#include <optional>

#include "fuzz/cli/commands.h"
#include "fuzz/cli/options.h"
#include "reference/generate.h"
#include "reference/scenario_json.h"

namespace kvfuzz::cli {

void add_gen(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("gen", "Print a generated case as JSON (the same seed gives the same bytes everywhere)");
  static uint64_t seed = 0;
  static std::string profile = "small";
  static std::optional<uint64_t> shape;
  cmd->add_option("--seed", seed, "Seed of the case")->check(seed_check())->capture_default_str();
  cmd->add_option("--profile", profile, "Size profile")->check(profile_check())->capture_default_str();
  cmd->add_option("--shape", shape,
                  "Seed of the shape (page size, model, dtype) the case is drawn on: as a campaign with "
                  "--reuse-shapes prints it")
      ->check(seed_check());
  cmd->callback([&exit_code] {
    const Profile p = *parse_profile(profile);
    if (!shape) {
      std::cout << to_json(generate(seed, p));
      exit_code = 0;
      return;
    }
    const std::optional<Scenario> s = generate(seed, p, generate_shape(*shape, p));
    if (!s) {
      std::cerr << "kvfuzz gen: no workload of seed " << seed << " fits shape " << *shape << " in profile " << profile
                << " (a campaign never prints this pair)\n";
      exit_code = 2;
      return;
    }
    std::cout << to_json(*s);
    exit_code = 0;
  });
}

}  // namespace kvfuzz::cli
