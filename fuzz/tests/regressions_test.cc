// Replays corpus/regressions/: one shrunk case per fault (<backend>__<fault>.json: the fault must
// be caught, and the case must be clean without it) and per real bug found (bug-*.json: clean on
// every backend now).
#include <gtest/gtest.h>

#include <filesystem>

#include "backends/registry.h"
#include "fuzz/case_check.h"
#include "reference/scenario_json.h"

namespace kvfuzz {
namespace {

TEST(Regressions, EveryCaseStillBehaves) {
  const std::filesystem::path dir = std::filesystem::path(KVFUZZ_CORPUS) / "regressions";
  int replayed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    const std::string name = entry.path().stem().string();
    const Scenario s = load_case(entry.path().string());
    ++replayed;
    const size_t sep = name.find("__");
    if (sep == std::string::npos) {  // a real bug, fixed
      const CaseReport r = check_all(s, all_backends(), {{}, true, 0});
      for (const Finding& f : r.findings) ADD_FAILURE() << name << ": " << f.backend << ": " << f.property << ": " << f.message;
      continue;
    }
    const Backend* b = find_backend(name.substr(0, sep));
    ASSERT_NE(b, nullptr) << name;
    const std::string fault = name.substr(sep + 2);
    EXPECT_FALSE(check_all(s, {b}, {{fault}, true, 0}).findings.empty()) << name << ": the fault is no longer caught";
    const CaseReport clean = check_all(s, {b}, {{}, true, 0});
    for (const Finding& f : clean.findings) ADD_FAILURE() << name << " without the fault: " << f.property << ": " << f.message;
  }
  if (replayed == 0) GTEST_SKIP() << "no regression cases in " << dir;
}

}  // namespace
}  // namespace kvfuzz
