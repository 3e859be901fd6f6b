// Case files: random scenarios round-trip exactly; bad files are rejected with a message that
// names the field.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "reference/case_error.h"
#include "reference/generate.h"
#include "reference/scenario_json.h"
#include "reference/validate.h"

namespace kvfuzz {
namespace {

rc::Gen<Profile> any_profile() {
  return rc::gen::element(Profile::tiny, Profile::small, Profile::medium, Profile::large);
}

RC_GTEST_PROP(ScenarioJson, RoundTripsGeneratedCasesExactly, ()) {
  const auto seed = *rc::gen::arbitrary<uint64_t>();
  const Profile profile = *any_profile();
  const Scenario s = generate(seed, profile);
  const std::string text = to_json(s);
  const Scenario back = scenario_from_json(text);
  RC_ASSERT(back == s);
  RC_ASSERT(to_json(back) == text);
}

TEST(ScenarioJson, RoundTripsEveryModeAndOp) {
  // Hand-made so that every optional field is present at least once.
  Scenario s;
  s.model = {4, 2, 8, 6, false, 0.35355339059327373, 30.0,
             {{LayerKind::full, 0, 0}, {LayerKind::sliding_window, 5, 0}, {LayerKind::chunked, 0, 8}}, {}};
  s.cache = {4, 64, 32, 4, 128, true};
  s.history = {{OpKind::admit, 0, 0, {}, {}},         {OpKind::extend, 0, 9, {}, {}},
               {OpKind::decode, 0, 0, {}, {}},        {OpKind::draft, 0, 0, {-1, 0, 0, 1}, {}},
               {OpKind::accept, 0, 0, {}, {0, 1, 3}}, {OpKind::swa_evict, 0, 0, {}, {}},
               {OpKind::admit, 7, 0, {}, {}},         {OpKind::free, 7, 0, {}, {}}};
  s.batch.mode = Mode::target_verify;
  s.batch.entries = {{0, 0, {-1, 0, 0}}};
  s.batch.draft_tokens = 3;
  s.batch.topk = 2;
  s.batch.graph_bs = 4;
  s.batch.kv_splits = 3;
  s.batch.device_sms = 132;
  s.values = {18446744073709551615ULL, DType::fp8_e4m3, Fill::signature, false};
  validate(s);
  EXPECT_EQ(scenario_from_json(to_json(s)), s);
  EXPECT_EQ(to_json(s).find("sinks"), std::string::npos);  // a model without sinks: no field
  s.model.sinks = {0.125, -2.5, 6.0, 0.1};  // any finite logit round-trips exactly
  validate(s);
  EXPECT_EQ(scenario_from_json(to_json(s)), s);
  s.model.sinks.clear();

  s.batch = {};
  s.batch.mode = Mode::draft_decode;
  s.batch.entries = {{0, 0, {}}};
  s.batch.topk = 3;
  s.batch.draft_steps = 4;
  s.batch.draft_step = 2;
  validate(s);
  EXPECT_EQ(scenario_from_json(to_json(s)), s);
}

TEST(ScenarioJson, WritesOneOpPerLine) {
  Scenario s = generate(3, Profile::tiny);
  const std::string text = to_json(s);
  EXPECT_NE(text.find("{\"op\": \"admit\""), std::string::npos) << text;
}

struct BadJson {
  const char* name;
  std::string text;
  const char* expected;  // a substring of the message
};

std::string valid_case() { return to_json(generate(11, Profile::tiny)); }

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(ScenarioJson, RejectsMalformedFilesNamingTheField) {
  const std::string ok = valid_case();
  const std::vector<BadJson> cases = {
      {"empty", "", "not valid JSON"},
      {"truncated", ok.substr(0, ok.size() / 2), "not valid JSON"},
      {"not an object", "[1, 2]", "expected an object"},
      {"wrong version", replace(ok, "\"version\": 2", "\"version\": 9"), "version: 9 is not supported"},
      {"too old", replace(ok, "\"version\": 2", "\"version\": 0"), "version: 0 is not supported"},
      {"field newer than v1", replace(ok, "\"version\": 2", "\"version\": 1"), "batch.device_sms: unknown field"},
      {"missing model", replace(ok, "\"model\"", "\"modle\""), "model: missing"},
      {"string for int", replace(ok, "\"q_heads\": ", "\"q_heads\": \"4\", \"x\": "), "model.q_heads: expected an integer"},
      {"float for int", replace(ok, "\"page_size\": ", "\"page_size\": 1.5, \"x\": "), "cache.page_size: expected an integer"},
      {"huge int", replace(ok, "\"full_pages\": ", "\"full_pages\": 99999999999, \"x\": "), "cache.full_pages: integer out of the 32-bit range"},
      {"unknown field", replace(ok, "\"mla\": ", "\"mlaa\": 1, \"mla\": "), "model.mlaa: unknown field"},
      {"bad enum", replace(ok, "\"dtype\": \"", "\"dtype\": \"fp4\", \"x\": \""), "values.dtype: 'fp4' is not one of"},
      {"bad mode", replace(ok, "\"mode\": \"", "\"mode\": \"prefill\", \"x\": \""), "batch.mode: 'prefill' is not one of"},
      {"negative seed", replace(ok, "\"seed\": ", "\"seed\": -1, \"x\": "), "values.seed: expected an integer in [0, 2^64)"},
      {"nan", replace(ok, "\"softcap\": ", "\"softcap\": NaN, \"x\": "), "not valid JSON"},
      // Found by the case_parser fuzzer: a number too large for a double escaped as an exception.
      {"number overflow", replace(ok, "\"softcap\": ", "\"softcap\": 0.4e35954999579, \"x\": "), "number overflow"},
      {"sinks not a list", replace(ok, "\"mla\": ", "\"sinks\": 1.5, \"mla\": "), "model.sinks: expected an array"},
      {"sink not a number", replace(ok, "\"mla\": ", "\"sinks\": [0.5, \"x\"], \"mla\": "),
       "model.sinks[1]: expected a finite number"},
      {"empty sinks", replace(ok, "\"mla\": ", "\"sinks\": [], \"mla\": "), "model.sinks: empty"},
      {"deep nesting", std::string(10000, '[') + std::string(10000, ']'), "nested deeper than"},
  };
  for (const BadJson& c : cases) {
    try {
      scenario_from_json(c.text);
      ADD_FAILURE() << c.name << ": accepted";
    } catch (const InvalidCase& e) {
      EXPECT_NE(std::string(e.what()).find(c.expected), std::string::npos)
          << c.name << ": message was: " << e.what();
    }
  }
}

// Version 1 had no batch.device_sms: such files read as static splits, and write back as version 2.
TEST(ScenarioJson, ReadsVersionOneFilesAsStaticSplits) {
  Scenario s = generate(5, Profile::tiny);
  s.batch.device_sms = 0;
  std::string v1 = replace(to_json(s), "\"version\": 2", "\"version\": 1");
  v1 = replace(v1, ",\n    \"device_sms\": 0", "");
  EXPECT_EQ(v1.find("device_sms"), std::string::npos);
  EXPECT_EQ(scenario_from_json(v1), s);
  EXPECT_NE(to_json(scenario_from_json(v1)).find("\"version\": 2"), std::string::npos);
}

}  // namespace
}  // namespace kvfuzz
