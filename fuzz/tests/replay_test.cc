// Every replay line kvfuzz prints reproduces its finding: pasted into a shell, it exits 1. Runs
// the built binary as a user does — a campaign with a fault into a folder whose name needs
// quoting (its .txt and .min.txt reports), `check`, `shrink -o` and `faults --out` — and runs each
// printed line. Plus the exact text of the line (fuzz/replay.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/replay.h"
#include "fuzz/tests/run_kvfuzz.h"

namespace kvfuzz {
namespace {

using test::Result;

const std::string kFault = "fa_local_token_table";
const std::string kRegression = std::string(KVFUZZ_CORPUS) + "/regressions/fa__fa_local_token_table.json";

// The replay lines of some output: the text after `marker` up to the end of its line.
std::vector<std::string> replay_lines(const std::string& text, const std::string& marker) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find(marker);
    if (at != std::string::npos) lines.push_back(line.substr(at + marker.size()));
  }
  return lines;
}

// Runs a printed line as pasted, from a directory other than the one it was printed in (no
// kvfuzz on PATH: it names the built binary and the case by their absolute paths).
Result run_printed(const std::string& line, const std::filesystem::path& cwd) {
  const std::string bin = std::filesystem::canonical(KVFUZZ_BIN).string();
  const std::string prefix = bin + " check ";
  EXPECT_EQ(line.rfind(prefix, 0), 0u) << line;
  EXPECT_TRUE(line.compare(prefix.size(), 1, "/") == 0 || line.compare(prefix.size(), 2, "'/") == 0) << line;
  const auto elsewhere = cwd / "elsewhere";
  std::filesystem::create_directories(elsewhere);
  return test::run_shell("cd " + shell_quote(elsewhere.string()) + " && " + line);
}

void expect_replays(const std::vector<std::string>& lines, const std::filesystem::path& cwd) {
  for (const std::string& line : lines) {
    EXPECT_NE(line.find("--fault " + kFault), std::string::npos) << line;
    const Result r = run_printed(line, cwd);
    EXPECT_EQ(r.code, 1) << line << "\n" << r.output;
  }
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Replay, CampaignReportsReplayTheirFindingsWithTheFault) {
  const auto dir = test::temp_dir("kvfuzz_replay_test");
  const std::string out = "find ings 'quoted'";  // a relative folder whose name needs quoting
  const Result run = test::run_shell("cd " + shell_quote(dir.string()) + " && " + KVFUZZ_BIN +
                                     " run --cases 8 --profile tiny --backend fa --jobs 1 --shrink-seconds 1 --fault " +
                                     kFault + " --out " + shell_quote(out));
  ASSERT_EQ(run.code, 1) << run.output;
  int reports = 0, shrunk = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir / out)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".txt") continue;
    const std::vector<std::string> lines = replay_lines(read_text(entry.path()), "replay: ");
    ASSERT_EQ(lines.size(), 1u) << name;
    expect_replays(lines, dir);
    ++reports;
    shrunk += name.size() > 8 && name.substr(name.size() - 8) == ".min.txt";
  }
  EXPECT_GT(shrunk, 0) << "no shrunk report in " << (dir / out);
  EXPECT_GT(reports, shrunk) << "no unshrunk report in " << (dir / out);
}

TEST(Replay, CheckShrinkAndFaultsPrintLinesThatReplay) {
  const auto dir = test::temp_dir("kvfuzz_replay_test_cli");
  const Result check = test::run_kvfuzz("check " + kRegression + " --backend fa --fault " + kFault);
  ASSERT_EQ(check.code, 1) << check.output;
  const std::vector<std::string> from_check = replay_lines(check.output, "replay with: ");
  ASSERT_EQ(from_check.size(), 1u) << check.output;
  expect_replays(from_check, dir);

  const std::string small = (dir / "small case.json").string();
  const Result shrink = test::run_kvfuzz("shrink " + kRegression + " --backend fa --seconds 2 --fault " + kFault +
                                         " -o " + shell_quote(small));
  ASSERT_EQ(shrink.code, 1) << shrink.output;
  const std::vector<std::string> from_shrink = replay_lines(shrink.output, "replay: ");
  ASSERT_EQ(from_shrink.size(), 1u) << shrink.output;
  EXPECT_NE(from_shrink[0].find(shell_quote(small)), std::string::npos) << from_shrink[0];
  expect_replays(from_shrink, dir);

  const Result faults =
      test::run_kvfuzz("faults --backend fa --only " + kFault + " --budget 200 --shrink-seconds 1 --out " +
                       shell_quote((dir / "fault cases").string()));
  ASSERT_EQ(faults.code, 0) << faults.output;
  const std::vector<std::string> from_faults = replay_lines(faults.output, "replay: ");
  ASSERT_EQ(from_faults.size(), 1u) << faults.output;
  expect_replays(from_faults, dir);
}

TEST(Replay, LineNamesEverythingTheFindingNeeds) {
  EXPECT_EQ(portable_replay_command({"findings/oracle-fa-3.json", "fa", {"fa_local_token_table"}, 0, {}}),
            "kvfuzz check findings/oracle-fa-3.json --backend fa --fault fa_local_token_table");
  EXPECT_EQ(portable_replay_command({"my findings/it's.json", "mla", {"a", "b"}, 12345, {}}),
            "kvfuzz check 'my findings/it'\\''s.json' --backend mla --fault a --fault b --variant-seed 12345");
  // As pasted: absolute paths; an adapter's command runs from the directory kvfuzz ran in.
  const std::string cwd = std::filesystem::current_path().string();
  set_replay_program("/opt/kv fuzz/kvfuzz");
  EXPECT_EQ(replay_command({"findings/oracle-fa-3.json", "fa", {}, 0, {}}),
            "'/opt/kv fuzz/kvfuzz' check " + shell_quote(cwd + "/findings/oracle-fa-3.json") + " --backend fa");
  EXPECT_EQ(replay_command({"/abs/x.json", "numpy_page_table", {}, 0, {"--adapter", "python3 a.py"}}),
            "(cd " + shell_quote(cwd) +
                " && '/opt/kv fuzz/kvfuzz' check /abs/x.json --backend numpy_page_table --adapter 'python3 a.py')");
  EXPECT_EQ(replay_command({"case-3.json", "fa", {}, 0, {}}, "kvfuzz gen --seed 3 --profile tiny > case-3.json"),
            "kvfuzz gen --seed 3 --profile tiny > case-3.json && '/opt/kv fuzz/kvfuzz' check case-3.json --backend fa");
  set_replay_program("kvfuzz");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("$HOME;rm"), "'$HOME;rm'");
}

}  // namespace
}  // namespace kvfuzz
