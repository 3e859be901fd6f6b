// kvfuzz bisect: the first release of an engine (sglang, vLLM) on the package index with a finding's
// mechanism, and the first without it. ci/bisect.py does the work (its --help lists the options):
// each release installed and run by ci/sglang.sh or ci/vllm.sh, each verdict with its command.
//
//   kvfuzz bisect --issue kvfuzz-flashinfer-swa-full-prefix           # a known issue's minimal case
//   kvfuzz bisect findings/cache-extent-triton-17-3fa2c1.json         # a campaign's saved finding
//   kvfuzz bisect case.json --engine vllm --backend fa --from 0.10.2 --to 0.15.0
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "fuzz/cli/commands.h"
#include "reference/case_error.h"

namespace kvfuzz::cli {

void add_bisect(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "bisect", "First engine release with a finding's mechanism and first without (ci/bisect.py; --help there)");
  cmd->set_help_flag();  // --help is the helper's
  cmd->prefix_command();
  cmd->callback([cmd, &exit_code] {
    const std::string helper = (std::filesystem::path(KVFUZZ_SOURCE_DIR) / "ci" / "bisect.py").string();
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    std::vector<std::string> args = {"python3", helper, "--kvfuzz", self};
    for (const std::string& a : cmd->remaining()) args.push_back(a);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::cout.flush();
    execvp("python3", argv.data());  // returns only on failure
    exit_code = 2;
    throw InvalidCase("bisect: cannot run python3 " + helper);
  });
}

}  // namespace kvfuzz::cli
