// Tests of backends/triton/: the split-KV arithmetic, hand-checked metadata on small
// hand-built cases, a hand-broken entry the checks pinpoint, generated sweeps (single-case and
// metamorphic properties), and every fault detected on generated cases.
#include <gtest/gtest.h>

#include <map>

#include "backends/tests/backend_test_util.h"
#include "backends/triton/triton_backend.h"
#include "backends/triton/triton_kv_splits.h"
#include "backends/triton/triton_planner.h"
#include "backends/triton/triton_split_range.h"
#include "properties/check.h"
#include "properties/metamorphic.h"
#include "reference/generate.h"
#include "reference/tests/test_level.h"

namespace kvfuzz {
namespace {

template <class T>
std::vector<int64_t> entries(const Buffer<T>& b, int64_t n) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(static_cast<int64_t>(b[i]));
  return out;
}

std::unique_ptr<TritonPlan> plan_of(const CaseContext& ctx, const std::vector<std::string>& faults = {}) {
  return plan_triton({ctx.scenario(), ctx.prepared().cache, ctx.batch(), faults});
}

using testing::metadata_findings;

void expect_passes(const CaseContext& ctx) { testing::expect_passes(ctx, triton_backend()); }

// Two requests (9 and 5 committed tokens), page size 4, a full and a window (W = 2) layer.
Scenario two_request_case(Mode mode) {
  Scenario s;
  s.model = {2, 1, 4, 4, false, 0.5, 0.0, {{LayerKind::full, 0, 0}, {LayerKind::sliding_window, 2, 0}}, {}};
  s.cache = {4, 16, 0, 4, 32, false};
  s.history = {{OpKind::admit, 0, 0, {}, {}},
               {OpKind::extend, 0, 9, {}, {}},
               {OpKind::admit, 1, 0, {}, {}},
               {OpKind::extend, 1, 5, {}, {}}};
  s.batch.mode = mode;
  s.batch.entries = {{0, mode == Mode::decode ? 0 : 3, {}}, {1, mode == Mode::decode ? 0 : 2, {}}};
  s.values.seed = 11;
  return s;
}

// ------------------------------------------------------------------------------ arithmetic --

TEST(TritonLayout, SplitsAreCeil32ChunksAndMaySkipEmptyOnes) {
  EXPECT_EQ(split_chunk_len(33, 8), 32);  // ceil(33 / 8) = 5 -> 32
  EXPECT_EQ(split_range(33, 8, 0).end, 32);
  EXPECT_EQ(split_range(33, 8, 1).begin, 32);
  EXPECT_EQ(split_range(33, 8, 1).end, 33);
  EXPECT_TRUE(split_range(33, 8, 2).empty());
  EXPECT_EQ(split_chunk_len(100, 2), 64);
  EXPECT_EQ(split_range(100, 2, 1).end - split_range(100, 2, 1).begin, 36);
  EXPECT_TRUE(split_range(0, 4, 0).empty());
}

// get_num_kv_splits_triton by hand (see triton_kv_splits.h for the formula).
TEST(TritonKvSplits, AdaptiveHeuristicByHand) {
  // Equal lengths: splits1 = 1; cores = int(132 * log2(1000 / 64)) = 523; GQA 32/8: BLOCK_H 4,
  // grid = 2 * 8 = 16; splits2 = min(ceil(523 / 16), 8) = 8, chunk2 = 125: 8 splits each.
  EXPECT_EQ(triton_kv_splits(std::vector<int32_t>{1000, 1000}, 1, {8, 132, 32, 8}), (std::vector<int32_t>{8, 8}));
  // Uneven: splits1 = min(10, 8), chunk1 = 125; cores = int(8 * 3.97) = 31, MHA grid 16,
  // splits2 = 2: the long request gets 8, the short one 1.
  EXPECT_EQ(triton_kv_splits(std::vector<int32_t>{1000, 100}, 1, {8, 8, 8, 8}), (std::vector<int32_t>{8, 1}));
  // Alone on a 1-SM device a request is not split; next to a fill-value row (seq_len 1) it is:
  // padding changes a real row's split count.
  EXPECT_EQ(triton_kv_splits(std::vector<int32_t>{1000}, 1, {8, 1, 8, 8}), (std::vector<int32_t>{1}));
  EXPECT_EQ(triton_kv_splits(std::vector<int32_t>{1000, 1}, 1, {8, 1, 8, 8}), (std::vector<int32_t>{8, 1}));
  // Draft decode: each request's topk rows share its count; grid = 2 * 2 * 4, splits2 = 4.
  EXPECT_EQ(triton_kv_splits(std::vector<int32_t>{64, 64}, 2, {4, 132, 4, 4}), (std::vector<int32_t>{4, 4, 4, 4}));
  // Static: every row max_kv_splits.
  EXPECT_EQ(triton_kv_splits(std::vector<int32_t>{1000, 1}, 1, {6, 0, 8, 8}), (std::vector<int32_t>{6, 6}));
}

TEST(TritonKvSplits, AlwaysWithinTheSplitDimension) {
  Rng rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<int32_t> lens(1 + rng.below(9));
    for (int32_t& len : lens) len = static_cast<int32_t>(rng.range(0, 5000));
    const SplitConfig c{static_cast<int32_t>(rng.range(1, 64)), static_cast<int32_t>(rng.range(0, 400)), 32,
                        static_cast<int32_t>(1 << rng.below(6))};
    for (int32_t s : triton_kv_splits(lens, static_cast<int32_t>(rng.range(1, 4)), c)) {
      ASSERT_GE(s, 1);
      ASSERT_LE(s, c.max_kv_splits);
    }
  }
}

// The planner feeds the padded batch: seq_lens {10, 6} and, replayed at graph_bs 3, a fill row.
TEST(TritonPlan, AdaptiveSplitsFollowThePaddedBatch) {
  Scenario s = two_request_case(Mode::decode);
  s.batch.kv_splits = 8;
  s.batch.device_sms = 1;
  {
    const CaseContext ctx(s);
    const auto p = plan_of(ctx);
    // lo 6, hi 10: splits1 = 2, chunk1 = 5; one SM: splits2 = 1. Windows: 3 keys each, 1 split.
    EXPECT_EQ(entries(p->csrs[0].num_kv_splits, 2), (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(entries(p->csrs[1].num_kv_splits, 2), (std::vector<int64_t>{1, 1}));
    EXPECT_TRUE(metadata_findings(ctx, *p).empty());
    expect_passes(ctx);
  }
  s.batch.graph_bs = 3;
  const CaseContext ctx(s);
  const auto p = plan_of(ctx);
  // lens {10, 6, 1}: splits1 = 8, chunk1 = 2.
  EXPECT_EQ(entries(p->csrs[0].num_kv_splits, 3), (std::vector<int64_t>{5, 3, 1}));
  EXPECT_TRUE(metadata_findings(ctx, *p).empty());
  expect_passes(ctx);
  // Hand-broken: more splits than attn_logits holds.
  p->csrs[0].num_kv_splits.set(1, 9);
  const auto findings = metadata_findings(ctx, *p);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_NE(findings[0].message.find("num_kv_splits[1] = 9 is outside [1, 8]"), std::string::npos) << findings[0].message;
}

// ------------------------------------------------------------------------ hand-built cases --

TEST(TritonPlan, DecodeTokenCsrAndWindowByHand) {
  const CaseContext ctx(two_request_case(Mode::decode));
  // Request 0 fills pages 1..3 (slots 4..12), request 1 pages 4..5 (slots 16..20); the decode
  // step appends slot 13 and slot 21.
  const auto p = plan_of(ctx);
  ASSERT_EQ(p->kernel, TritonKernel::decode);
  ASSERT_EQ(p->csrs.size(), 2u);
  const KvCsr& full = p->csrs[0];
  EXPECT_EQ(entries(full.kv_indptr, 3), (std::vector<int64_t>{0, 10, 16}));
  EXPECT_EQ(full.kv_indices.capacity(), 16);  // eager: exact
  EXPECT_EQ(entries(full.kv_indices, 16),
            (std::vector<int64_t>{4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 17, 18, 19, 20, 21}));
  // W = 2: the query at position P sees [P - 2, P], three keys.
  const KvCsr& window = p->csrs[1];
  EXPECT_EQ(window.kv_indices.name(), "window_kv_indices(W=2)");
  EXPECT_EQ(entries(window.kv_indptr, 3), (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(entries(window.kv_indices, 6), (std::vector<int64_t>{11, 12, 13, 19, 20, 21}));
  EXPECT_EQ(entries(window.kv_offsets, 2), (std::vector<int64_t>{7, 3}));
  EXPECT_EQ(entries(full.num_kv_splits, 2), (std::vector<int64_t>{1, 1}));  // static, kv_splits 1
  EXPECT_EQ(entries(window.num_kv_splits, 2), (std::vector<int64_t>{1, 1}));
  EXPECT_TRUE(metadata_findings(ctx, *p).empty());
  expect_passes(ctx);
}

TEST(TritonPlan, ExtendCsrCoversThePrefixOnly) {
  const CaseContext ctx(two_request_case(Mode::extend));
  const auto p = plan_of(ctx);
  ASSERT_EQ(p->kernel, TritonKernel::extend);
  EXPECT_EQ(entries(p->qo_indptr, 3), (std::vector<int64_t>{0, 3, 5}));
  EXPECT_EQ(entries(p->csrs[0].kv_indptr, 3), (std::vector<int64_t>{0, 9, 14}));
  // Window prefix: the last min(prefix, W) = 2 keys; the in-kernel mask does the rest.
  EXPECT_EQ(entries(p->csrs[1].kv_indptr, 3), (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(entries(p->csrs[1].kv_indices, 4), (std::vector<int64_t>{11, 12, 19, 20}));
  EXPECT_EQ(entries(p->csrs[1].kv_offsets, 2), (std::vector<int64_t>{7, 3}));
  expect_passes(ctx);
}

TEST(TritonPlan, VerifyTreeMaskAndPrefixCsrByHand) {
  Scenario s;
  s.model = {2, 2, 4, 4, false, 0.5, 0.0, {{LayerKind::full, 0, 0}}, {}};
  s.cache = {1, 32, 0, 2, 16, false};
  s.history = {{OpKind::admit, 0, 0, {}, {}}, {OpKind::extend, 0, 5, {}, {}}};
  s.batch = testing::tree_verify_batch(2, {-1, 0, 0});  // a root with two children
  s.batch.graph_bs = 2;
  const CaseContext ctx(s);
  const auto p = plan_of(ctx);
  EXPECT_EQ(entries(p->qo_indptr, 3), (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(entries(p->csrs[0].kv_indptr, 3), (std::vector<int64_t>{0, 5, 6}));  // padded row: seq_len 1
  EXPECT_EQ(entries(p->csrs[0].kv_indices, 6), (std::vector<int64_t>{1, 2, 3, 4, 5, 0}));
  // CUDA graph: max_num_tokens (2 rows x D) * max_context_len.
  EXPECT_EQ(p->csrs[0].kv_indices.capacity(), 2 * 3 * 16);
  EXPECT_EQ(p->custom_mask.capacity(), 2 * 3 * 16);
  // D * (seq_len + D) per row: 3 * 8, then the padded row 3 * 4.
  EXPECT_EQ(entries(p->mask_indptr, 3), (std::vector<int64_t>{0, 24, 36}));
  const std::vector<int64_t> want = {1, 1, 1, 1, 1, 1, 0, 0,   // root
                                     1, 1, 1, 1, 1, 1, 1, 0,   // child 1: root, itself
                                     1, 1, 1, 1, 1, 1, 0, 1};  // child 2
  EXPECT_EQ(entries(p->custom_mask, 24), want);
  EXPECT_TRUE(metadata_findings(ctx, *p).empty());
  expect_passes(ctx);
}

TEST(TritonPlan, DraftDecodeBranchesReadTheirOwnPageRegion) {
  Scenario s;
  s.model = {1, 1, 4, 4, false, 0.5, 0.0, {{LayerKind::full, 0, 0}, {LayerKind::sliding_window, 3, 0}}, {}};
  s.cache = {4, 16, 0, 2, 32, false};
  s.history = {{OpKind::admit, 0, 0, {}, {}}, {OpKind::extend, 0, 6, {}, {}}};
  s.batch = testing::draft_decode_batch(2, 3, 1);
  const CaseContext ctx(s);
  const auto p = plan_of(ctx);
  ASSERT_EQ(p->rows, 2);  // (request 0, branch 0), (request 0, branch 1)
  // Prefix slots 4..9 (pages 1, 2); branch 0 region = pages 2, 3 (drafts at slots 10, 11, 12),
  // branch 1 region = pages 4, 5 (tail copy 16, 17; drafts 18, 19, 20). Step 1: steps 0..1.
  EXPECT_EQ(entries(p->csrs[0].kv_indptr, 3), (std::vector<int64_t>{0, 8, 16}));
  EXPECT_EQ(entries(p->csrs[0].kv_indices, 16),
            (std::vector<int64_t>{4, 5, 6, 7, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 18, 19}));
  // W = 3 at position 7: positions 4..7 = prefix columns 4, 5 and steps 0, 1.
  EXPECT_EQ(entries(p->csrs[1].kv_indptr, 3), (std::vector<int64_t>{0, 4, 8}));
  EXPECT_EQ(entries(p->csrs[1].kv_indices, 8), (std::vector<int64_t>{8, 9, 10, 11, 8, 9, 18, 19}));
  EXPECT_TRUE(metadata_findings(ctx, *p).empty());
  expect_passes(ctx);
  p->csrs[0].kv_indices.set(14, 10);  // branch 1's step 0: its own slot 18 -> branch 0's 10
  const auto findings = metadata_findings(ctx, *p);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].property, "stride-divide");
  EXPECT_EQ(findings[0].message,
            "kv_indices[14] maps layer 0, row 0 (request 0), key column 9 (req_to_token column 14) to slot 10; "
            "req_to_token says slot 18");
}

TEST(TritonPlan, HybridWindowSlotsAreTranslatedToTheSwaPool) {
  Scenario s;
  s.model = {2, 1, 4, 4, false, 0.5, 0.0, {{LayerKind::full, 0, 0}, {LayerKind::sliding_window, 2, 0}}, {}};
  s.cache = {1, 16, 8, 3, 16, false};
  // Request 5 takes full/SWA slots 1..4 and frees them; request 0 then gets full slots 5..10 and
  // SWA slots 5..8, 1, 2 (FIFO reuse): the mapping is no longer the identity.
  s.history = {{OpKind::admit, 5, 0, {}, {}},
               {OpKind::extend, 5, 4, {}, {}},
               {OpKind::free, 5, 0, {}, {}},
               {OpKind::admit, 0, 0, {}, {}},
               {OpKind::extend, 0, 6, {}, {}}};
  s.batch.mode = Mode::decode;
  s.batch.entries = {{0, 0, {}}};
  const CaseContext ctx(s);
  const auto p = plan_of(ctx);
  EXPECT_EQ(p->csrs[1].pool, PoolKind::swa);
  EXPECT_EQ(entries(p->csrs[0].kv_indices, 7), (std::vector<int64_t>{5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(entries(p->csrs[1].kv_indices, 3), (std::vector<int64_t>{1, 2, 3}));  // full 9, 10, 11
  expect_passes(ctx);
}

TEST(TritonPlan, ABrokenEntryIsPinpointed) {
  const CaseContext ctx(two_request_case(Mode::decode));
  auto p = plan_of(ctx);
  p->csrs[0].kv_indices.set(3, 9);  // column 3 of request 0 lives in slot 7
  p->csrs[1].kv_indptr.set(2, 5);   // request 1's window loses its newest key
  const auto findings = metadata_findings(ctx, *p);
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].property, "stride-divide");
  EXPECT_EQ(findings[0].message,
            "kv_indices[3] maps layer 0, row 0 (request 0), key column 3 to slot 9; req_to_token says slot 7");
  EXPECT_EQ(findings[1].property, "metadata");
  EXPECT_EQ(findings[1].message, "window_kv_indptr(W=2)[2] - [1] is 2, expected 3 (too small)");
}

TEST(TritonPlan, TheSplitCountDoesNotChangeTheOutput) {
  Scenario s = two_request_case(Mode::decode);
  s.history[1].len = 100;  // 101 keys: up to four splits of 32
  s.cache.full_pages = 40;
  s.cache.max_context_len = 128;
  for (int32_t sms : {0, 1, 132}) {
    for (int32_t splits : {1, 2, 3, 8}) {
      s.batch.kv_splits = splits;
      s.batch.device_sms = sms;
      const CaseContext ctx(s);
      expect_passes(ctx);
      const BackendRun base = run_backend(ctx, triton_backend());
      for (const Finding& f : check_metamorphic(ctx, base, triton_backend(), {}, 1))
        ADD_FAILURE() << splits << " splits, " << sms << " SMs: " << f.property << ": " << f.message;
    }
  }
}

// Attention sinks join each row once, after stage 2 merged the splits: the oracle agrees and the
// output does not change with the split count (a sink folded into every split would change both).
TEST(TritonPlan, SinksJoinOnceWhateverTheSplits) {
  Scenario s = two_request_case(Mode::decode);
  s.history[1].len = 100;  // 101 keys: up to four splits of 32
  s.cache.full_pages = 40;
  s.cache.max_context_len = 128;
  s.model.sinks = {2.5, -1.0};
  for (int32_t splits : {1, 4}) {
    s.batch.kv_splits = splits;
    const CaseContext ctx(s);
    EXPECT_EQ(plan_of(ctx)->sinks, s.model.sinks);
    expect_passes(ctx);
    const BackendRun base = run_backend(ctx, triton_backend());
    for (const Finding& f : check_metamorphic(ctx, base, triton_backend(), {}, 1))
      ADD_FAILURE() << splits << " splits: " << f.property << ": " << f.message;
  }
}

TEST(TritonGenerated, PassesGptOssCasesWithSinks) {
  for (uint64_t seed = 0; seed < static_cast<uint64_t>(testing::test_cases(100)); ++seed) {
    const CheckResult r = check_case(CaseContext(generate(seed, Profile::gpt_oss)), triton_backend());
    ASSERT_TRUE(r.support.ok) << r.support.why;
    for (const Finding& f : r.findings)
      ADD_FAILURE() << "gpt-oss seed " << seed << ": " << f.property << ": " << f.message;
  }
}

// -------------------------------------------------------------------------- generated cases --

TEST(TritonGenerated, EveryCasePasses) {
  std::map<std::string, int> modes;
  bool split_between = false, split_differs = false;  // adaptive counts strictly inside (1, max)
  for (Profile profile : {Profile::tiny, Profile::small, Profile::medium}) {
    const int64_t n = testing::test_cases(profile == Profile::medium ? 40 : 400);
    for (uint64_t seed = 0; seed < static_cast<uint64_t>(n); ++seed) {
      const CaseContext ctx(generate(seed, profile));
      const CheckResult r = check_case(ctx, triton_backend());
      ASSERT_TRUE(r.support.ok) << r.support.why;
      ++modes[to_string(ctx.scenario().batch.mode)];
      for (const Finding& f : r.findings)
        ADD_FAILURE() << to_string(profile) << " seed " << seed << ": " << f.property << ": " << f.message;
      const auto p = plan_of(ctx);
      if (p->kernel != TritonKernel::decode) continue;
      for (const KvCsr& csr : p->csrs) {
        for (int32_t row = 0; row < p->rows; ++row) {
          split_between |= csr.num_kv_splits[row] > 1 && csr.num_kv_splits[row] < p->max_kv_splits;
          split_differs |= csr.num_kv_splits[row] != csr.num_kv_splits[0];
        }
      }
    }
  }
  EXPECT_EQ(modes.size(), 7u);  // every mode came up
  EXPECT_TRUE(split_between);
  EXPECT_TRUE(split_differs);
}

TEST(TritonGenerated, IsInvariantUnderEveryMetamorphicVariant) {
  for (uint64_t seed = 0; seed < static_cast<uint64_t>(testing::test_cases(200)); ++seed) {
    const CaseContext ctx(generate(seed, Profile::small));
    const BackendRun base = run_backend(ctx, triton_backend());
    ASSERT_TRUE(base.ran) << "seed " << seed;
    for (const Finding& f : check_metamorphic(ctx, base, triton_backend(), {}, seed))
      ADD_FAILURE() << "seed " << seed << ": " << f.property << ": " << f.message;
  }
}

// --------------------------------------------------------------------------------- faults --

TEST(TritonFaults, EachIsDetectedOnGeneratedCases) {
  for (const FaultInfo& fault : triton_backend().faults()) {
    std::map<std::string, int> by_property;
    int64_t cases = 0, detected = 0;
    for (uint64_t seed = 0; seed < 2000 && detected < 5; ++seed, ++cases) {
      const CaseContext ctx(generate(seed, Profile::small));
      const CheckResult r = check_case(ctx, triton_backend(), {fault.name});
      if (r.findings.empty()) continue;
      ++detected;
      for (const Finding& f : r.findings) ++by_property[f.property];
    }
    EXPECT_EQ(detected, 5) << fault.name << " after " << cases << " cases";
    std::string props;
    for (const auto& [name, count] : by_property) props += " " + name + "=" + std::to_string(count);
    std::printf("%-36s 5 detections in %3lld cases:%s\n", fault.name.c_str(), static_cast<long long>(cases),
                props.c_str());
  }
}

TEST(TritonFaults, WindowShortMissesTheOldestKeyOfAHandCase) {
  const CaseContext ctx(two_request_case(Mode::decode));
  const CheckResult r = check_case(ctx, triton_backend(), {std::string(triton_fault::kSwaDecodeWindowShort)});
  bool missing = false;
  for (const Finding& f : r.findings)
    missing |= f.property == "cache-extent" && f.message.find("missing       7") != std::string::npos;
  EXPECT_TRUE(missing);
}

TEST(TritonFaults, PagesSizedGraphBufferOverflows) {
  Scenario s = two_request_case(Mode::decode);
  s.batch.graph_bs = 3;  // capacity 3 * ceil(32 / 4) = 24 keys; the batch writes 10 + 6 + 1: fits
  EXPECT_TRUE(
      check_case(CaseContext(s), triton_backend(), {std::string(triton_fault::kGraphKvIndicesPages)}).findings.empty());
  s.history[3].len = 14;  // 10 + 15 + 1 = 26 keys
  const CheckResult r = check_case(CaseContext(s), triton_backend(), {std::string(triton_fault::kGraphKvIndicesPages)});
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].property, "in-bounds");
  EXPECT_NE(r.findings[0].message.find("kv_indices: write at index 24, outside its capacity 24"), std::string::npos)
      << r.findings[0].message;
}

}  // namespace
}  // namespace kvfuzz
