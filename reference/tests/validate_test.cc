// validate(): every kind of bad case is rejected with a message naming the field and the limit,
// and every generated case is accepted.
#include <gtest/gtest.h>

#include <functional>

#include "reference/case_error.h"
#include "reference/generate.h"
#include "reference/tests/test_level.h"
#include "reference/validate.h"

namespace kvfuzz {
namespace {

// A small valid case to break one field at a time: two requests, a hybrid SWA pool.
Scenario base_case() {
  Scenario s;
  s.model = {4, 2, 8, 8, false, 0.25, 0.0, {{LayerKind::full, 0, 0}, {LayerKind::sliding_window, 3, 0}}, {}};
  s.cache = {4, 32, 16, 4, 64, false};
  s.history = {{OpKind::admit, 0, 0, {}, {}}, {OpKind::extend, 0, 10, {}, {}},
               {OpKind::admit, 1, 0, {}, {}}, {OpKind::extend, 1, 5, {}, {}}};
  s.batch.mode = Mode::decode;
  s.batch.entries = {{0, 0, {}}, {1, 0, {}}};
  return s;
}

struct BadCase {
  const char* name;
  std::function<void(Scenario&)> breaks;
  const char* expected;
};

TEST(Validate, AcceptsTheBaseCase) { EXPECT_NO_THROW(validate(base_case())); }

TEST(Validate, RejectsBadCasesNamingFieldAndLimit) {
  using O = OpKind;
  const std::vector<BadCase> cases = {
      {"zero heads", [](Scenario& s) { s.model.q_heads = 0; }, "model.q_heads: 0 is out of range [1, 128]"},
      {"gqa", [](Scenario& s) { s.model.kv_heads = 8; }, "model.kv_heads: 8 is out of range [1, 4]"},
      {"gqa divisibility", [](Scenario& s) { s.model.q_heads = 6; s.model.kv_heads = 4; }, "does not divide q_heads"},
      {"head dim", [](Scenario& s) { s.model.head_dim = 100000; }, "model.head_dim: 100000 is out of range"},
      {"mla heads", [](Scenario& s) { s.model.mla = true; }, "one KV head"},
      {"mla v", [](Scenario& s) { s.model.mla = true; s.model.kv_heads = 1; s.model.v_head_dim = 9; }, "v_head_dim <= head_dim"},
      {"scale", [](Scenario& s) { s.model.sm_scale = -1; }, "model.sm_scale"},
      {"softcap", [](Scenario& s) { s.model.softcap = -2; }, "model.softcap"},
      {"sinks per q head", [](Scenario& s) { s.model.sinks = {1.0, 2.0}; },
       "model.sinks: holds 2 sink logits; the model has q_heads = 4 (one per q head)"},
      {"sink magnitude", [](Scenario& s) { s.model.sinks = {0.0, 0.0, 1e9, 0.0}; }, "model.sinks[2]: must be finite"},
      {"no layers", [](Scenario& s) { s.model.layers.clear(); }, "model.layers (count): 0"},
      {"window on full", [](Scenario& s) { s.model.layers[0].window = 4; }, "model.layers[0].window: must be 0"},
      {"negative window", [](Scenario& s) { s.model.layers[1].window = -1; }, "model.layers[1].window: -1 is out of range"},
      {"chunk vs page", [](Scenario& s) { s.model.layers[0] = {LayerKind::chunked, 0, 6}; }, "not a multiple of cache.page_size"},
      {"page size", [](Scenario& s) { s.cache.page_size = 0; }, "cache.page_size: 0 is out of range [1, 256]"},
      {"absurd pool", [](Scenario& s) { s.cache.full_pages = 2000000000; }, "cache.full_pages"},
      {"pool memory",
       [](Scenario& s) {
         s.model.q_heads = s.model.kv_heads = 128;
         s.model.head_dim = s.model.v_head_dim = 512;
         s.cache.full_pages = s.cache.swa_pages = 2000;
         s.cache.max_context_len = 8192;
         s.history[1].len = 5000;
       },
       "written values, over the limit of"},
      {"req_to_token size", [](Scenario& s) { s.cache.max_requests = 1000; s.cache.max_context_len = 100000; }, "req_to_token would hold"},
      {"swa without window", [](Scenario& s) { s.model.layers.pop_back(); }, "an SWA pool needs"},
      {"unknown request", [](Scenario& s) { s.history.push_back({O::extend, 9, 1, {}, {}}); }, "history[4]: request 9 is not live"},
      {"double admit", [](Scenario& s) { s.history.push_back({O::admit, 0, 0, {}, {}}); }, "history[4]: request 0 is already live"},
      {"zero extend", [](Scenario& s) { s.history[1].len = 0; }, "history[1].len: 0 is out of range"},
      {"len on decode", [](Scenario& s) { s.history.push_back({O::decode, 0, 3, {}, {}}); }, "history[4].len: must be 0"},
      {"context", [](Scenario& s) { s.cache.swa_pages = 40; s.history[1].len = 64; }, "over cache.max_context_len = 64"},
      {"pool exhausted", [](Scenario& s) { s.cache.full_pages = 3; }, "the KV pool is exhausted"},
      {"rows exhausted", [](Scenario& s) { s.cache.max_requests = 1; }, "no free req_to_token row"},
      {"tree root", [](Scenario& s) { s.history.push_back({O::draft, 0, 0, {0, 0}, {}}); }, "node 0 is the root"},
      {"tree order", [](Scenario& s) { s.history.push_back({O::draft, 0, 0, {-1, 2, 0}, {}}); }, "must come before its child"},
      {"pending drafts", [](Scenario& s) { s.history.push_back({O::draft, 0, 0, {-1, 0}, {}}); }, "ends with pending drafts"},
      {"bad path", [](Scenario& s) {
         s.history.push_back({O::draft, 0, 0, {-1, 0, 0}, {}});
         s.history.push_back({O::accept, 0, 0, {}, {0, 2, 1}});
       }, "does not continue a root-to-leaf path"},
      {"accept without draft", [](Scenario& s) { s.history.push_back({O::accept, 0, 0, {}, {0}}); }, "no pending drafts"},
      {"evict without pool", [](Scenario& s) { s.cache.swa_pages = 0; s.history.push_back({O::swa_evict, 0, 0, {}, {}}); }, "needs an SWA pool"},
      {"duplicate entry", [](Scenario& s) { s.batch.entries[1].request = 0; }, "already in the batch"},
      {"dead entry", [](Scenario& s) { s.batch.entries[1].request = 5; }, "batch.entries[1]: request 5 is not live"},
      {"idle entries", [](Scenario& s) { s.batch.mode = Mode::idle; }, "an idle batch has no entries"},
      {"extend_len on decode", [](Scenario& s) { s.batch.entries[0].extend_len = 2; }, "batch.entries[0].extend_len: must be 0"},
      {"extend needs len", [](Scenario& s) { s.batch.mode = Mode::extend; }, "batch.entries[0].extend_len: 0 is out of range"},
      {"verify tree size", [](Scenario& s) {
         s.batch.mode = Mode::target_verify;
         s.batch.draft_tokens = 3;
         s.batch.entries[0].parents = {-1, 0};
         s.batch.entries[1].parents = {-1, 0, 1};
       }, "batch.entries[0].parents: has 2 nodes"},
      {"verify topk", [](Scenario& s) {
         s.batch.mode = Mode::target_verify;
         s.batch.draft_tokens = 3;
         s.batch.entries[0].parents = {-1, 0, 0};
         s.batch.entries[1].parents = {-1, 0, 1};
       }, "more than topk = 1 children"},
      {"draft step", [](Scenario& s) { s.batch.mode = Mode::draft_decode; s.batch.draft_steps = 2; s.batch.draft_step = 2; }, "batch.draft_step: 2 is out of range [0, 1]"},
      {"graph too small", [](Scenario& s) { s.batch.graph_bs = 1; }, "batch.graph_bs: 1 is out of range [2, 512]"},
      {"kv splits", [](Scenario& s) { s.batch.kv_splits = 0; }, "batch.kv_splits: 0 is out of range [1, 64]"},
      {"device sms", [](Scenario& s) { s.batch.device_sms = -1; }, "batch.device_sms: -1 is out of range [0, 1024]"},
      {"batch context", [](Scenario& s) { s.batch.mode = Mode::extend; s.batch.entries = {{0, 60, {}}}; }, "over cache.max_context_len"},
      {"decode empty request", [](Scenario& s) { s.history.push_back({O::admit, 2, 0, {}, {}}); s.batch.entries.push_back({2, 0, {}}); }, "needs a prefilled request"},
      {"oracle work", [](Scenario& s) {
         s.model.q_heads = 128; s.model.kv_heads = 1; s.model.head_dim = 576; s.model.v_head_dim = 512;
         s.model.mla = true;
         s.cache = {16, 8000, 0, 4, 65536, false};
         s.model.layers = {{}, {}};
         s.history = {{O::admit, 0, 0, {}, {}}};
         s.batch.mode = Mode::extend;
         s.batch.entries = {{0, 60000, {}}};
       }, "the oracle would do"},
  };
  for (const BadCase& c : cases) {
    Scenario s = base_case();
    c.breaks(s);
    try {
      validate(s);
      ADD_FAILURE() << c.name << ": accepted";
    } catch (const InvalidCase& e) {
      EXPECT_NE(std::string(e.what()).find(c.expected), std::string::npos) << c.name << ": message was: " << e.what();
    }
  }
}

TEST(Validate, AcceptsEveryGeneratedCase) {
  for (uint64_t seed = 0; seed < static_cast<uint64_t>(testing::test_cases(300)); ++seed) {
    for (Profile p : {Profile::tiny, Profile::small, Profile::medium}) {
      const Scenario s = generate(seed, p);
      EXPECT_NO_THROW(validate(s)) << "seed " << seed << " profile " << to_string(p);
    }
  }
}

}  // namespace
}  // namespace kvfuzz
