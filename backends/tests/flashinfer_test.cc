// Tests of backends/flashinfer/: hand-checked CSR tables on small built cases, the metadata
// checks pinpointing a hand-broken entry, the generated-case sweep, and every fault detected.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "backends/flashinfer/flashinfer_backend.h"
#include "backends/flashinfer/flashinfer_plan.h"
#include "backends/tests/backend_test_util.h"
#include "properties/check.h"
#include "reference/generate.h"
#include "reference/tests/test_level.h"

namespace kvfuzz {
namespace {

using flashinfer::FlashInferPlan;
using flashinfer::Role;
using flashinfer::WrapperPlan;
using Ints = std::vector<int32_t>;

using testing::admit;
using testing::extend;
using testing::metadata_findings;
using testing::swa_evict;

Scenario small_case(int32_t page_size, std::vector<Layer> layers) {
  Scenario s;
  s.model.q_heads = 2;
  s.model.kv_heads = 1;
  s.model.head_dim = 4;
  s.model.v_head_dim = 4;
  s.model.sm_scale = 0.5;
  s.model.layers = std::move(layers);
  s.cache = {page_size, 16, 0, 4, 32, false};
  s.values.seed = 7;
  return s;
}

const Layer kFull{};
Layer window(int32_t w) { return {LayerKind::sliding_window, w, 0}; }

// A plan of a built case, kept with what it was planned from.
struct Planned {
  CaseContext ctx;
  std::unique_ptr<Plan> plan;
  Planned(const Scenario& s, const Backend& b, std::vector<std::string> faults = {}) : ctx(s) {
    plan = b.plan({ctx.scenario(), ctx.prepared().cache, ctx.batch(), faults});
  }
  const FlashInferPlan& fi() const { return dynamic_cast<const FlashInferPlan&>(*plan); }
  const WrapperPlan& call(int32_t layer, size_t c = 0) const {
    return fi().groups[static_cast<size_t>(fi().group_of_layer[static_cast<size_t>(layer)])].calls[c];
  }
  std::vector<MetadataChecker::Item> check() const { return metadata_findings(ctx, *plan); }
};

template <class T>
std::vector<int32_t> all(const Buffer<T>& b) {
  std::vector<int32_t> out;
  for (int64_t i = 0; i < b.capacity(); ++i) out.push_back(static_cast<int32_t>(b[i]));
  return out;
}

void expect_clean(const Scenario& s, const Backend& b) { testing::expect_passes(CaseContext(s), b); }

// Request 0 holds columns 0..8 at slots 4..11, 16 (pages 1, 2, 4 of size 4), request 1 columns
// 0..2 at slots 12..14 (page 3). The decode batch is (request 1, request 0): their new tokens go
// to slots 15 and 17.
Scenario decode_case() {
  Scenario s = small_case(4, {kFull, window(2)});
  s.history = {admit(0), extend(0, 6), admit(1), extend(1, 3), extend(0, 3)};
  s.batch.mode = Mode::decode;
  s.batch.entries = {{1, 0, {}}, {0, 0, {}}};
  return s;
}

TEST(FlashInferPlanner, DecodeIndicesAreTokenSlotsAtPageSizeOne) {
  Planned p(decode_case(), flashinfer_backend());
  const WrapperPlan& full = p.call(0);
  EXPECT_EQ(full.page_size, 1);
  EXPECT_EQ(all(full.qo_indptr), (Ints{0, 1, 2}));
  EXPECT_EQ(all(full.kv_indptr), (Ints{0, 4, 14}));
  EXPECT_EQ(all(full.kv_indices), (Ints{12, 13, 14, 15, 4, 5, 6, 7, 8, 9, 10, 11, 16, 17}));
  EXPECT_EQ(all(full.kv_last_page_len), (Ints{1, 1}));
  // Window W = 2: the last min(seq_len, W + 1) = 3 keys, from kv_start_idx = seq_len - 3.
  const WrapperPlan& win = p.call(1);
  EXPECT_EQ(all(win.kv_indptr), (Ints{0, 3, 6}));
  EXPECT_EQ(all(win.kv_indices), (Ints{13, 14, 15, 11, 16, 17}));
  EXPECT_EQ(win.window_left, -1);  // sglang's decode relies on the indices alone
  EXPECT_TRUE(p.check().empty());
  expect_clean(decode_case(), flashinfer_backend());
}

TEST(FlashInferPlanner, DecodeIndicesArePagesAtTheCachePageSize) {
  Planned p(decode_case(), flashinfer_paged_backend());
  const WrapperPlan& full = p.call(0);
  EXPECT_EQ(full.page_size, 4);
  EXPECT_EQ(all(full.kv_indptr), (Ints{0, 1, 4}));
  EXPECT_EQ(all(full.kv_indices), (Ints{3, 1, 2, 4}));
  EXPECT_EQ(all(full.kv_last_page_len), (Ints{4, 2}));  // 4 = 0*4 + 4, 10 = 2*4 + 2
  // Window rows start at the page holding key seq_len - 3 and mask its head with window_left.
  const WrapperPlan& win = p.call(1);
  EXPECT_EQ(all(win.kv_indptr), (Ints{0, 1, 3}));
  EXPECT_EQ(all(win.kv_indices), (Ints{3, 2, 4}));  // row 1: columns 4..9
  EXPECT_EQ(all(win.kv_last_page_len), (Ints{4, 2}));
  EXPECT_EQ(win.window_left, 2);
  EXPECT_TRUE(p.check().empty());
  expect_clean(decode_case(), flashinfer_paged_backend());
}

// A hybrid model whose SWA pool diverged: request 0's first SWA page was evicted and request 1
// reused it, so request 1's full slots 12..15 live at SWA slots 4..7.
Scenario hybrid_case() {
  Scenario s = small_case(4, {kFull, window(2)});
  s.cache.swa_pages = 8;
  s.history = {admit(0), extend(0, 8), swa_evict(0), admit(1), extend(1, 3)};
  s.batch.mode = Mode::decode;
  s.batch.entries = {{1, 0, {}}};
  return s;
}

TEST(FlashInferPlanner, WindowLayersTranslateSlotsToTheSwaPool) {
  Planned token(hybrid_case(), flashinfer_backend());
  EXPECT_EQ(all(token.call(0).kv_indices), (Ints{12, 13, 14, 15}));
  EXPECT_EQ(all(token.call(1).kv_indices), (Ints{5, 6, 7}));  // full 13..15 -> SWA 5..7
  Planned paged(hybrid_case(), flashinfer_paged_backend());
  EXPECT_EQ(all(paged.call(0).kv_indices), (Ints{3}));
  EXPECT_EQ(all(paged.call(1).kv_indices), (Ints{1}));  // slot of the first token 12 -> 4, / 4
  expect_clean(hybrid_case(), flashinfer_backend());
  expect_clean(hybrid_case(), flashinfer_paged_backend());
}

// Request 0 has 5 cached tokens at slots 2..6 (page size 2) and extends by 3 (slots 7, 8, 9).
Scenario extend_case() {
  Scenario s = small_case(2, {kFull, window(1)});
  s.history = {admit(0), extend(0, 5)};
  s.batch.mode = Mode::extend;
  s.batch.entries = {{0, 3, {}}};
  return s;
}

TEST(FlashInferPlanner, RaggedExtendMergesNewTokensWithTheTrimmedPrefix) {
  Planned p(extend_case(), flashinfer_backend());
  EXPECT_EQ(p.fi().merge, flashinfer::MergeKernel::flashinfer_base2);
  const WrapperPlan& ragged = p.call(0, 0);
  EXPECT_EQ(ragged.role, Role::ragged);
  EXPECT_EQ(all(ragged.qo_indptr), (Ints{0, 3}));
  EXPECT_EQ(all(ragged.kv_indptr), (Ints{0, 3}));
  EXPECT_TRUE(ragged.causal);
  const WrapperPlan& prefix = p.call(0, 1);
  EXPECT_EQ(prefix.role, Role::prefix);
  EXPECT_FALSE(prefix.causal);
  EXPECT_EQ(all(prefix.kv_indices), (Ints{2, 3, 4, 5, 6}));
  // Window W = 1: the prefix keeps min(5, W) = 1 key (column 4), seen only by the query at 5.
  EXPECT_EQ(p.call(1, 0).window_left, 1);
  const WrapperPlan& win = p.call(1, 1);
  EXPECT_EQ(all(win.kv_indices), (Ints{6}));
  EXPECT_EQ(all(win.mask_indptr), (Ints{0, 3}));
  EXPECT_EQ(all(win.custom_mask), (Ints{1, 0, 0}));
  EXPECT_TRUE(p.check().empty());

  Planned paged(extend_case(), flashinfer_paged_backend());
  EXPECT_EQ(all(paged.call(0, 1).kv_indices), (Ints{1, 2, 3}));
  EXPECT_EQ(all(paged.call(0, 1).kv_last_page_len), (Ints{1}));
  EXPECT_EQ(all(paged.call(1, 1).kv_indices), (Ints{3}));  // column 4 opens page 3
  EXPECT_EQ(all(paged.call(1, 1).custom_mask), (Ints{1, 0, 0}));
  expect_clean(extend_case(), flashinfer_backend());
  expect_clean(extend_case(), flashinfer_paged_backend());
}

// One request with 3 cached tokens verifies a tree of 3 drafts: root 0 with children 1 and 2.
Scenario verify_case() {
  Scenario s = small_case(1, {kFull, window(1)});
  s.history = {admit(0), extend(0, 3)};
  s.batch = testing::tree_verify_batch(2, {-1, 0, 0});
  return s;
}

TEST(FlashInferPlanner, VerifyReadsPrefixAndDraftsThroughTheTreeMask) {
  Planned p(verify_case(), flashinfer_backend());
  const WrapperPlan& full = p.call(0);
  EXPECT_EQ(all(full.qo_indptr), (Ints{0, 3}));
  EXPECT_EQ(all(full.kv_indices), (Ints{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(all(full.custom_mask), (Ints{1, 1, 1, 1, 0, 0, /**/ 1, 1, 1, 1, 1, 0, /**/ 1, 1, 1, 1, 0, 1}));
  // Window W = 1 from the root at position 3: columns 2..5; drafts 1 and 2 sit at position 4.
  const WrapperPlan& win = p.call(1);
  EXPECT_EQ(all(win.kv_indices), (Ints{3, 4, 5, 6}));
  EXPECT_EQ(all(win.custom_mask), (Ints{1, 1, 0, 0, /**/ 0, 1, 1, 0, /**/ 0, 1, 0, 1}));
  EXPECT_TRUE(p.check().empty());
  expect_clean(verify_case(), flashinfer_backend());
  expect_clean(verify_case(), flashinfer_paged_backend());
}

// Drafting with topk 2, 2 steps, at step 1, page size 4, prefix 6 (slots 4..9): branch 0 drafts
// into the real last page (slots 10, 11); branch 1's region is page 3 with its copy of the prefix
// tail at slots 12, 13 and its drafts at 14, 15.
Scenario draft_case() {
  Scenario s = small_case(4, {kFull});
  s.history = {admit(0), extend(0, 6)};
  s.batch = testing::draft_decode_batch(2, 2, 1);
  return s;
}

TEST(FlashInferPlanner, DraftBranchesReadTheirOwnPagesAfterThePrefixPages) {
  Planned token(draft_case(), flashinfer_backend());
  EXPECT_EQ(all(token.call(0).qo_indptr), (Ints{0, 1, 2}));
  EXPECT_EQ(all(token.call(0).kv_indptr), (Ints{0, 8, 16}));
  EXPECT_EQ(all(token.call(0).kv_indices), (Ints{4, 5, 6, 7, 8, 9, 10, 11, /**/ 4, 5, 6, 7, 8, 9, 14, 15}));
  Planned paged(draft_case(), flashinfer_paged_backend());
  EXPECT_EQ(all(paged.call(0).kv_indptr), (Ints{0, 2, 4}));
  EXPECT_EQ(all(paged.call(0).kv_indices), (Ints{1, 2, /**/ 1, 3}));
  EXPECT_EQ(all(paged.call(0).kv_last_page_len), (Ints{4, 4}));
  EXPECT_TRUE(paged.check().empty());
  expect_clean(draft_case(), flashinfer_backend());
  expect_clean(draft_case(), flashinfer_paged_backend());
}

TEST(FlashInferPlanner, GraphReplayFillsCaptureSizedBuffers) {
  Scenario s = decode_case();
  s.batch.graph_bs = 4;
  Planned p(s, flashinfer_paged_backend());
  const WrapperPlan& full = p.call(0);
  EXPECT_EQ(full.kv_indices.capacity(), 4 * 32);  // max_num_tokens * max_context_len
  EXPECT_EQ(full.kv_indices.prefix(6), (Ints{3, 1, 2, 4, 0, 0}));  // padded rows: page 0
  EXPECT_EQ(all(full.kv_indptr), (Ints{0, 1, 4, 5, 6}));
  EXPECT_EQ(all(full.kv_last_page_len), (Ints{4, 2, 1, 1}));
  EXPECT_TRUE(p.check().empty());
  expect_clean(s, flashinfer_paged_backend());
  expect_clean(s, flashinfer_backend());
}

// vLLM's CUDA-graph padding (empty_padded_rows): padded rows read no page; a padded row given one is
// a finding, and without the flag the same rows are held to sglang's dummy page.
TEST(FlashInferCheck, EmptyPaddedRowsReadNoKeys) {
  Scenario s = decode_case();
  s.batch.graph_bs = 4;
  Planned p(s, flashinfer_paged_backend());
  auto& full = const_cast<WrapperPlan&>(p.call(0));
  full.kv_indptr.set(3, 4);
  full.kv_indptr.set(4, 4);  // rows 2 and 3 (padded): no pages
  auto items = p.check();
  ASSERT_FALSE(items.empty());
  EXPECT_NE(items[0].message.find("kv_indptr[3] - [2] is 0, expected 1"), std::string::npos) << items[0].message;
  full.empty_padded_rows = true;
  EXPECT_TRUE(p.check().empty());
  full.kv_indptr.set(4, 5);  // padded row 3 given a real page
  full.kv_indices.set(4, 3);
  items = p.check();
  ASSERT_FALSE(items.empty());
  EXPECT_NE(items[0].message.find("kv_indptr[4] - [3] is 1, expected 0"), std::string::npos) << items[0].message;
}

TEST(FlashInferCheck, PinpointsABrokenIndex) {
  Planned p(decode_case(), flashinfer_backend());
  auto& full = const_cast<WrapperPlan&>(p.call(0));
  full.kv_indices.set(5, 6);  // row 1, key 1 must be slot 5
  const auto items = p.check();
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].property, "stride-divide");
  EXPECT_NE(items[0].message.find("full.decode.kv_indices[5]"), std::string::npos) << items[0].message;
  EXPECT_NE(items[0].message.find("key column 1 to slot 6"), std::string::npos) << items[0].message;
}

TEST(FlashInferCheck, PinpointsABrokenBranchPage) {
  Planned p(draft_case(), flashinfer_paged_backend());
  const_cast<WrapperPlan&>(p.call(0)).kv_indices.set(3, 2);  // branch 1's region: page 3 -> 2
  const auto items = p.check();
  ASSERT_FALSE(items.empty());
  EXPECT_EQ(items[0].property, "stride-divide");
  EXPECT_EQ(items[0].message,
            "full.draft.kv_indices[3] maps layer 0, row 0 (request 0), key column 4 (req_to_token column 8) to slot "
            "8; req_to_token says slot 12");
}

TEST(FlashInferCheck, PinpointsABrokenLastPageLen) {
  Planned p(decode_case(), flashinfer_paged_backend());
  auto& full = const_cast<WrapperPlan&>(p.call(0));
  full.kv_last_page_len.set(1, 5);
  const auto items = p.check();
  ASSERT_EQ(items.size(), 2u);
  EXPECT_NE(items[0].message.find("full.decode.kv_last_page_len[1] is 5, outside [1, 4]"), std::string::npos)
      << items[0].message;
  EXPECT_NE(items[1].message.find("row 1"), std::string::npos) << items[1].message;
  EXPECT_NE(items[1].message.find("is 13, expected 10"), std::string::npos) << items[1].message;
}

// -------------------------------------------------------------------------- generated cases --

TEST(FlashInferSweep, GeneratedCasesPassWithoutFaults) {
  const int64_t n = testing::test_cases(400);
  for (const Backend* b : {&flashinfer_backend(), &flashinfer_paged_backend()}) {
    for (Profile profile : {Profile::tiny, Profile::small}) {
      int64_t ran = 0, failed = 0;
      const auto start = std::chrono::steady_clock::now();
      for (int64_t seed = 0; seed < n; ++seed) {
        CaseContext ctx(generate(static_cast<uint64_t>(seed), profile));
        const CheckResult r = check_case(ctx, *b);
        if (!r.support.ok) continue;
        ++ran;
        if (!r.findings.empty() && failed++ < 3)
          ADD_FAILURE() << b->name() << " " << to_string(profile) << " seed " << seed << ": "
                        << r.findings[0].property << ": " << r.findings[0].message;
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::cout << b->name() << " " << to_string(profile) << ": " << ran << " cases, " << failed << " failing ("
                << static_cast<int64_t>(static_cast<double>(n) / s) << " cases/s with the oracle)\n";
    }
  }
}

// The first generated case on which `fault` gives a finding that the clean planner does not.
int64_t cases_to_detection(const Backend& b, const std::string& fault, int64_t limit, std::string* what) {
  for (int64_t seed = 0; seed < limit; ++seed) {
    CaseContext ctx(generate(static_cast<uint64_t>(seed), Profile::small));
    const CheckResult r = check_case(ctx, b, {fault});
    if (!r.support.ok || r.findings.empty()) continue;
    EXPECT_TRUE(check_case(ctx, b).findings.empty()) << "seed " << seed << " fails without the fault";
    *what = r.findings[0].property + ": " + r.findings[0].message;
    return seed + 1;
  }
  return -1;
}

TEST(FlashInferFaults, EveryFaultIsDetectedOnGeneratedCases) {
  for (const Backend* b : {&flashinfer_backend(), &flashinfer_paged_backend()}) {
    for (const FaultInfo& f : b->faults()) {
      std::string what;
      const int64_t n = cases_to_detection(*b, f.name, 400, &what);
      EXPECT_GT(n, 0) << b->name() << ": " << f.name << " not detected in 400 small cases";
      std::cout << b->name() << " " << f.name << ": detected after " << n << " cases\n  "
                << what.substr(0, what.find('\n')) << "\n";
    }
  }
}

TEST(FlashInferFaults, LastPageLenOverflowExistsOnlyWherePagesDo) {
  EXPECT_EQ(flashinfer_backend().faults().size(), 3u);
  EXPECT_EQ(flashinfer_paged_backend().faults().size(), 4u);
  Planned p(decode_case(), flashinfer_paged_backend(), {"flashinfer_last_page_len_overflow"});
  EXPECT_EQ(all(p.call(0).kv_last_page_len), (Ints{4, 4}));
  EXPECT_FALSE(p.check().empty());
}

// fp8 scales in the plan (FlashInferPlan::descales, descales.h: vLLM's run(k_scale, v_scale) per
// row): the executor reads a paged row's stored values times them; the layer's own scales give the
// plan-less result bit for bit, k and v swapped change it and are named by check_metadata.
TEST(FlashInferDescales, ConsumedByTheExecutorAndCheckedAgainstTheLayer) {
  int checked = 0;
  for (uint64_t seed = 1; seed < 60 && checked < 3; ++seed) {
    const Scenario s = generate(seed, Profile::fp8);
    const Layer& l0 = s.model.layers.front();
    const Backend& b = flashinfer_paged_backend();
    if (s.model.mla || l0.k_scale == l0.v_scale || !b.supports(s).ok) continue;
    Planned p(s, b);
    auto& plan = const_cast<FlashInferPlan&>(p.fi());
    bool paged = true;
    for (const auto& g : plan.groups)
      for (const WrapperPlan& w : g.calls) paged = paged && w.paged();
    if (!paged) continue;  // ragged calls read the batch's new K/V, which no scale touches
    auto run = [&] {
      KvPools pools(s, p.ctx.prepared().cache, p.ctx.values());
      RunOutput out(s, p.ctx.prepared().batch);
      b.run(plan, {s, p.ctx.prepared().cache, p.ctx.prepared().batch, pools, p.ctx.tensors()}, out);
      return out.out;
    };
    const std::vector<float> want = run();
    auto set = [&](bool swapped) {
      plan.descales.clear();
      for (size_t l = 0; l < s.model.layers.size(); ++l) {
        const Layer& layer = s.model.layers[l];
        LayerDescales d;
        for (const WrapperPlan& w : plan.groups[static_cast<size_t>(plan.group_of_layer[l])].calls) {
          const auto n = static_cast<size_t>(w.rows * s.model.kv_heads);
          d.parts.push_back({{}, std::vector<double>(n, swapped ? layer.v_scale : layer.k_scale),
                             std::vector<double>(n, swapped ? layer.k_scale : layer.v_scale)});
        }
        plan.descales.push_back(d);
      }
    };
    set(false);
    EXPECT_EQ(run(), want) << "seed " << seed;
    EXPECT_TRUE(p.check().empty()) << "seed " << seed;
    set(true);
    EXPECT_NE(run(), want) << "seed " << seed;
    const auto found = p.check();
    ASSERT_FALSE(found.empty()) << "seed " << seed;
    EXPECT_NE(found.front().message.find("call flashinfer.0 is handed k_descale[0][0] = "), std::string::npos)
        << found.front().message;
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

TEST(FlashInferFaults, UntranslatedWindowIndicesArePinpointed) {
  Planned p(hybrid_case(), flashinfer_backend(), {"flashinfer_swa_untranslated"});
  EXPECT_EQ(all(p.call(1).kv_indices), (Ints{13, 14, 15}));
  const auto items = p.check();
  ASSERT_FALSE(items.empty());
  EXPECT_NE(items[0].message.find("window2.decode.kv_indices[0]"), std::string::npos) << items[0].message;
}

TEST(FlashInferFaults, ShortWindowDropsTheOldestKey) {
  Planned p(decode_case(), flashinfer_backend(), {"flashinfer_swa_decode_window_short"});
  EXPECT_EQ(all(p.call(1).kv_indices), (Ints{14, 15, 16, 17}));
  EXPECT_FALSE(p.check().empty());
}

TEST(FlashInferFaults, NaturalExpMergeMisweighsTheParts) {
  CaseContext ctx(extend_case());
  const CheckResult r = check_case(ctx, flashinfer_backend(), {"flashinfer_lse_base_mismatch"});
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].property, "oracle");
}

}  // namespace
}  // namespace kvfuzz
