// The command line as a user meets it: every bad input gets a message naming what is wrong and
// exit code 2; a finding exits 1; a clean run exits 0.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "fuzz/tests/run_kvfuzz.h"
#include "reference/oracle_dispatch.h"

namespace {

using kvfuzz::test::Result;

Result run(const std::string& args) { return kvfuzz::test::run_kvfuzz(args); }

std::string temp_file(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / "kvfuzz_cli_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(Cli, GenIsDeterministicAndOracleReadsIt) {
  const Result a = run("gen --seed 5 --profile tiny"), b = run("gen --seed 5 --profile tiny");
  ASSERT_EQ(a.code, 0);
  EXPECT_EQ(a.output, b.output);
  const Result o = run("oracle " + temp_file("case.json", a.output));
  EXPECT_EQ(o.code, 0) << o.output;
  EXPECT_NE(o.output.find("queries"), std::string::npos) << o.output;
}

// The oracle's run-time ISA choice (reference/oracle_dispatch.h) seen from the command line: each
// ISA this CPU runs, forced with KVFUZZ_ORACLE_ISA, prints the same output norm to the last bit
// (%.17g) on generated cases; an ISA it does not know or cannot run exits 2 naming it.
TEST(Cli, OracleGivesTheSameOutputOnEveryIsa) {
  const auto oracle_with = [](const std::string& isa, const std::string& file) {
    const Result r = kvfuzz::test::run_shell("KVFUZZ_ORACLE_ISA=" + isa + " " + KVFUZZ_BIN + " oracle " + file);
    EXPECT_EQ(r.code, 0) << r.output;
    const size_t norm = r.output.find("output norm"), time = r.output.find("oracle time");
    EXPECT_NE(norm, std::string::npos) << r.output;
    const std::map<std::string, std::string> kernels = {
        {"portable", "portable (2 doubles"}, {"avx2", "AVX2+FMA (4 doubles"}, {"avx512", "AVX-512 (8 doubles"}};
    EXPECT_NE(r.output.find(kernels.at(isa), time), std::string::npos) << r.output;
    return r.output.substr(0, time);  // everything but the time
  };
  for (int seed = 1; seed <= 6; ++seed) {
    const std::string file =
        temp_file("isa_case.json", run("gen --seed " + std::to_string(seed) + " --profile small").output);
    const std::string want = oracle_with("portable", file);
    for (kvfuzz::Isa isa : kvfuzz::runnable_isas())
      EXPECT_EQ(oracle_with(std::string(kvfuzz::isa_name(isa)), file), want) << "seed " << seed;
  }
  const std::string file = temp_file("isa_case.json", run("gen --seed 1 --profile tiny").output);
  const Result unknown =
      kvfuzz::test::run_shell(std::string("KVFUZZ_ORACLE_ISA=sse9 ") + KVFUZZ_BIN + " oracle " + file);
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.output.find("KVFUZZ_ORACLE_ISA=sse9: no such ISA"), std::string::npos) << unknown.output;
  const Result bench = run("bench oracle --isa sse9");
  EXPECT_EQ(bench.code, 2);
  EXPECT_NE(bench.output.find("--isa sse9: no such ISA"), std::string::npos) << bench.output;
}

TEST(Cli, BadInputExitsTwoWithAMessage) {
  const std::string good = run("gen --seed 5 --profile tiny").output;
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"", "A subcommand is required"},
      {"frobnicate", "frobnicate"},
      {"gen --profile huge", "--profile"},
      {"gen --seed -3", "--seed"},
      {"oracle /does/not/exist.json", "/does/not/exist.json: cannot open"},
      {"oracle " + temp_file("trunc.json", good.substr(0, good.size() / 3)), "not valid JSON"},
      {"oracle " + temp_file("binary.json", std::string("\x00\xff\x10", 3)), "not valid JSON"},
      {"check " + temp_file("bad_page.json", good.substr(0, good.find("\"page_size\": ") + 13) + "0" +
                                                 good.substr(good.find(',', good.find("\"page_size\": ")))),
       "cache.page_size: 0 is out of range"},
      {"check " + temp_file("ok.json", good) + " --backend nosuch", "--backend: unknown backend 'nosuch'"},
      // ... with the hint that an executor of your own comes with --adapter
      {"check " + temp_file("ok.json", good) + " --backend numpy_page_table", "add --adapter 'COMMAND'"},
      {"check " + temp_file("ok.json", good) + " --fault nosuch",
       "--fault: no selected backend has a fault named 'nosuch'"},
      {"oracle " + std::filesystem::temp_directory_path().string(), "is a directory, not a case file"},
      {"run --cases -1", "--cases: must be a number >= 0, got '-1'"},
      {"run --seconds soon", "--seconds: must be a number >= 0, got 'soon'"},
      {"faults --budget 0", "--budget: must be a number > 0, got '0'"},
      {"run --jobs 100000", "--jobs"},
      {"shrink", "case is required"},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
  }
}

TEST(Cli, CheckPinpointsABrokenTableEntry) {
  // The planner fault hands local attention the token-granular table (sglang #23757).
  const std::string c = std::string(KVFUZZ_CORPUS) + "/regressions/fa__fa_local_token_table.json";
  const Result broken = run("check " + c + " --backend fa --fault fa_local_token_table");
  EXPECT_EQ(broken.code, 1) << broken.output;
  EXPECT_NE(broken.output.find("stride-divide: extend.local2.local_block_table[0] maps layer 0, row 0 (request 0), key "
                               "column 0 to slot 4; req_to_token says slot 2"),
            std::string::npos)
      << broken.output;
  EXPECT_NE(broken.output.find("--fault fa_local_token_table"), std::string::npos) << broken.output;
  const Result clean = run("check " + c + " --backend fa");
  EXPECT_EQ(clean.code, 0) << clean.output;
}

TEST(Cli, CheckRunsSeveralCasesInTurnEachUnderItsName) {
  // The broken case between two clean ones: its lines come under its name, the exit is 1, and a
  // bad file among them is named before any case runs.
  const std::string broken = std::string(KVFUZZ_CORPUS) + "/regressions/fa__fa_local_token_table.json";
  const std::string clean = temp_file("clean.json", run("gen --seed 5 --profile tiny").output);
  const Result r = run("check " + clean + " " + broken + " " + clean + " --backend fa --fault fa_local_token_table");
  EXPECT_EQ(r.code, 1) << r.output;
  const size_t first = r.output.find("== " + clean + "\n"), second = r.output.find("== " + broken + "\n"),
               third = r.output.find("== " + clean + "\n", second), finding = r.output.find("stride-divide");
  ASSERT_NE(first, std::string::npos) << r.output;
  ASSERT_NE(second, std::string::npos) << r.output;
  ASSERT_NE(third, std::string::npos) << r.output;
  EXPECT_TRUE(first < second && second < finding && finding < third) << r.output;
  EXPECT_NE(r.output.find("fa: ok (every property)", third), std::string::npos) << r.output;
  const Result bad = run("check " + clean + " /nonexistent/case.json --backend fa");
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("/nonexistent/case.json"), std::string::npos) << bad.output;
  EXPECT_EQ(bad.output.find("fa: ok"), std::string::npos) << bad.output;
  const Result stdin_twice = run("check - " + clean + " --backend fa");
  EXPECT_EQ(stdin_twice.code, 2) << stdin_twice.output;
}

TEST(Cli, ExplainDrawsTheFailingQuery) {
  const std::string c = std::string(KVFUZZ_CORPUS) + "/regressions/fa__fa_local_token_table.json";
  const auto svg = std::filesystem::temp_directory_path() / "kvfuzz_cli_test" / "explain.svg";
  std::filesystem::remove(svg);
  const Result r = run("explain " + c + " --backend fa --fault fa_local_token_table --svg " + svg.string());
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("expected #"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("foreign  full slot 4 (outside the pool)"), std::string::npos) << r.output;
  std::ifstream in(svg);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("<svg", 0), 0u);
  EXPECT_NE(text.find("</svg>"), std::string::npos);
}

TEST(Cli, ReadsCasesFromStandardInput) {
  const Result r = run("gen --seed 9 --profile tiny | " + std::string(KVFUZZ_BIN) + " oracle -");
  EXPECT_EQ(r.code, 0) << r.output;
}

}  // namespace
