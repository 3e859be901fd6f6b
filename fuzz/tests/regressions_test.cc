// Replays corpus/regressions/: one shrunk case per fault (<backend>__<fault>.json: with the fault
// on, the general property its <name>.property sidecar records must fire — not only some
// backend's own check — and the case must be clean without it) and per real bug found
// (bug-*.json: clean on every backend now; its sidecar records the property that found it).
#include <gtest/gtest.h>

#include <filesystem>

#include "backends/registry.h"
#include "fuzz/case_check.h"
#include "fuzz/regression_property.h"
#include "reference/scenario_json.h"

namespace kvfuzz {
namespace {

TEST(Regressions, EveryCaseIsCaughtByItsRecordedGeneralProperty) {
  const std::filesystem::path dir = std::filesystem::path(KVFUZZ_CORPUS) / "regressions";
  int replayed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    const std::string name = entry.path().stem().string();
    const Scenario s = load_case(entry.path().string());
    std::string property;
    try {
      property = read_regression_property(entry.path().string());
    } catch (const std::exception& e) {
      ADD_FAILURE() << name << ": " << e.what();
      continue;
    }
    ++replayed;
    const size_t sep = name.find("__");
    if (sep == std::string::npos) {  // a real bug, fixed
      const CaseReport r = check_all(s, all_backends(), {{}, true, 0});
      for (const Finding& f : r.findings)
        ADD_FAILURE() << name << ": " << f.backend << ": " << f.property << ": " << f.message;
      continue;
    }
    const Backend* b = find_backend(name.substr(0, sep));
    ASSERT_NE(b, nullptr) << name;
    const std::string fault = name.substr(sep + 2);
    const CaseReport with = check_all(s, {b}, {{fault}, true, 0});
    bool fired = false;
    std::string seen;
    for (const Finding& f : with.findings) {
      fired |= f.property == property;
      seen += " " + f.property;
    }
    EXPECT_TRUE(fired) << name << ": " << property << " does not fire with the fault on (fired:" << seen << ")";
    const CaseReport clean = check_all(s, {b}, {{}, true, 0});
    for (const Finding& f : clean.findings)
      ADD_FAILURE() << name << " without the fault: " << f.property << ": " << f.message;
  }
  if (replayed == 0) GTEST_SKIP() << "no regression cases in " << dir;
}

TEST(Regressions, OnlyGeneralPropertiesMayBeRecorded) {
  for (const char* p : {"in-bounds", "stride-divide", "cache-extent", "oracle", "metamorphic", "replay", "crash"})
    EXPECT_TRUE(is_general_property(p)) << p;
  for (const char* p : {"metadata", "", "stride_divide", "Oracle"}) EXPECT_FALSE(is_general_property(p)) << p;
  EXPECT_EQ(regression_property_path("corpus/regressions/fa__x.json"), "corpus/regressions/fa__x.property");
}

}  // namespace
}  // namespace kvfuzz
