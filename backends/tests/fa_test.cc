// Tests of backends/fa/: hand-checked tables on small hand-built cases, broken entries that the
// checks pinpoint, generated-case sweeps, and every planted fault detected.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "backends/fa/fa_backend.h"
#include "backends/fa/fa_plan.h"
#include "backends/tests/backend_test_util.h"
#include "properties/check.h"
#include "reference/generate.h"
#include "reference/tests/test_level.h"

namespace kvfuzz {
namespace {

using fa::FaCall;
using fa::FaPlan;

using testing::admit;
using testing::extend;
using testing::metadata_findings;
using testing::release;
using testing::swa_evict;

Scenario make_case(int32_t ps, std::vector<Layer> layers, CacheConfig cache, std::vector<Op> history, Batch batch) {
  Scenario s;
  s.model = {2, 1, 4, 4, false, 0.5, 0.0, std::move(layers), {}};
  s.cache = cache;
  s.cache.page_size = ps;
  s.history = std::move(history);
  s.batch = std::move(batch);
  s.values.seed = 9;
  return s;
}

// A case with its plan, for reading tables.
struct Planned {
  explicit Planned(Scenario s, std::vector<std::string> faults = {})
      : ctx(std::move(s)),
        faults_(std::move(faults)),
        plan(fa_backend().plan({ctx.scenario(), ctx.prepared().cache, ctx.batch(), faults_})) {}
  FaPlan& fa() { return static_cast<FaPlan&>(*plan); }
  std::vector<MetadataChecker::Item> check() { return metadata_findings(ctx, *plan); }
  CaseContext ctx;
  std::vector<std::string> faults_;
  std::unique_ptr<Plan> plan;
};

std::vector<int32_t> read(const Buffer<int32_t>& b, int64_t n) { return b.prefix(n); }

using testing::describe;

void expect_passes(const Scenario& s) { testing::expect_passes(CaseContext(s), fa_backend()); }

// ------------------------------------------------------------------ hand-checked tables --

// Request 2 takes page 1 and finishes; request 0 holds pages 2..4, request 1 reuses page 1 (LIFO),
// then page 5. Decode adds column 9 (slot 17) and column 5 (slot 21).
Scenario decode_case(int32_t graph_bs = 0) {
  Batch b{Mode::decode, {{0, 0, {}}, {1, 0, {}}}, 0, 1, 0, 0, graph_bs, 1};
  return make_case(4, {{LayerKind::full, 0, 0}}, {4, 16, 0, 4, 32, false},
                   {admit(2), extend(2, 4), admit(0), extend(0, 9), release(2), admit(1), extend(1, 5)}, b);
}

TEST(FaTables, DecodePageTableIsStridedThenDivided) {
  Planned p(decode_case());
  const FaCall& c = p.fa().full.parts.at(0);
  EXPECT_EQ(c.view_page_size, 4);
  EXPECT_EQ(c.width, 3);  // ceil(max_seq_len_k = 10 / 4)
  EXPECT_EQ(read(c.page_table, 6), (std::vector<int32_t>{2, 3, 4, 1, 5, 0}));
  EXPECT_EQ(read(c.cache_seqlens, 2), (std::vector<int32_t>{10, 6}));
  EXPECT_EQ(read(c.cu_seqlens_q, 3), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(read(c.cu_seqlens_k, 3), (std::vector<int32_t>{0, 10, 16}));
  EXPECT_EQ(c.max_seqlen_k, 10);
  EXPECT_TRUE(p.check().empty());
  expect_passes(decode_case());
}

TEST(FaTables, CudaGraphReplayFillsCaptureSizedBuffers) {
  Planned p(decode_case(/*graph_bs=*/3));
  const FaCall& c = p.fa().full.parts.at(0);
  EXPECT_EQ(c.width, 8);  // ceil(max_context_len 32 / 4), allocated at capture
  EXPECT_EQ(c.page_table.capacity(), 3 * 8);
  EXPECT_EQ(read(c.page_table, 24),
            (std::vector<int32_t>{2, 3, 4, 0, 0, 0, 0, 0, 1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(read(c.cache_seqlens, 3), (std::vector<int32_t>{10, 6, 1}));  // padded row: fill value 1
  EXPECT_TRUE(p.check().empty());
  expect_passes(decode_case(3));
}

// Request 0's first four tokens leave every window (W = 1) and their SWA pages are reused by
// request 1, so full_to_swa stops being the identity.
Scenario swa_case() {
  Batch b{Mode::decode, {{0, 0, {}}, {1, 0, {}}}, 0, 1, 0, 0, 0, 1};
  return make_case(2, {{LayerKind::full, 0, 0}, {LayerKind::sliding_window, 1, 0}}, {2, 16, 8, 4, 16, false},
                   {admit(0), extend(0, 6), swa_evict(0), admit(1), extend(1, 4)}, b);
}

TEST(FaTables, SwaPageTableTranslatesTokenSlotsThenDivides) {
  Planned p(swa_case());
  ASSERT_TRUE(p.fa().has_sliding);
  // Full: request 0 at slots 2..7, 12; request 1 at 8..11, 14.
  EXPECT_EQ(read(p.fa().full.parts.at(0).page_table, 8), (std::vector<int32_t>{1, 2, 3, 6, 4, 5, 7, 0}));
  // SWA: evicted columns map to page 0; request 1 got the freed SWA pages 1 and 2.
  const FaCall& swa = p.fa().sliding.parts.at(0);
  EXPECT_EQ(swa.page_table.name(), "decode.swa_page_table");
  EXPECT_EQ(read(swa.page_table, 8), (std::vector<int32_t>{0, 0, 3, 4, 1, 2, 5, 0}));
  EXPECT_TRUE(p.check().empty());
  expect_passes(swa_case());
}

// Prefix 3, tree parents [-1, 0, 0, 1]; drafts at slots 6..9; a sliding-window layer too.
Scenario verify_case(int32_t ps = 1) {
  Batch b{Mode::target_verify, {{0, 0, {-1, 0, 0, 1}}}, 4, 2, 0, 0, 0, 1};
  return make_case(ps, {{LayerKind::full, 0, 0}, {LayerKind::sliding_window, 1, 0}}, {ps, 32, 24, 4, 32, false},
                   {admit(2), extend(2, 2), admit(0), extend(0, 3), release(2)}, b);
}

TEST(FaTables, TreeVerifyIsACascadeWithCompactedExpandRows) {
  Planned p(verify_case());
  ASSERT_EQ(p.fa().full.parts.size(), 2u);
  const FaCall& main = p.fa().full.parts[0];
  EXPECT_FALSE(main.causal);
  EXPECT_EQ(read(main.cu_seqlens_q, 2), (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(read(main.cache_seqlens, 1), (std::vector<int32_t>{3}));
  EXPECT_EQ(read(main.page_table, 3), (std::vector<int32_t>{3, 4, 5}));
  const FaCall& expand = p.fa().full.parts[1];
  EXPECT_EQ(expand.view_page_size, 1);
  EXPECT_EQ(read(expand.cache_seqlens, 4), (std::vector<int32_t>{1, 2, 2, 3}));  // ancestors and itself
  EXPECT_EQ(read(expand.page_table, 16),
            (std::vector<int32_t>{6, 7, 8, 9, 6, 7, 8, 9, 6, 8, 7, 9, 6, 7, 9, 8}));  // visible first
  // Sliding-window layer: one causal row per draft over prefix ++ visible drafts.
  const FaCall& swa = p.fa().sliding.parts.at(0);
  EXPECT_TRUE(swa.causal);
  EXPECT_EQ(read(swa.cache_seqlens, 4), (std::vector<int32_t>{4, 5, 5, 6}));
  EXPECT_EQ(read(swa.page_table, 7 * 4),
            (std::vector<int32_t>{3, 4, 5, 6, 0, 0, 0, 3, 4, 5, 6, 7, 0, 0, 3, 4, 5, 6, 8, 0, 0, 3, 4, 5, 6, 7, 9, 0}));
  EXPECT_TRUE(p.check().empty());
  expect_passes(verify_case());
  expect_passes(verify_case(4));
}

// Prefix 3 + extend 6 at ps 2, chunk 4: s = 9, q = 6, p = 3 -> f = 1, n = 3, t = 1.
Scenario local_case(int32_t chunk = 4, int32_t prefix = 3, int32_t extend_len = 6) {
  Batch b{Mode::extend, {{0, extend_len, {}}}, 0, 1, 0, 0, 0, 1};
  return make_case(2, {{LayerKind::chunked, 0, chunk}}, {2, 16, 0, 4, 32, false}, {admit(0), extend(0, prefix)}, b);
}

TEST(FaTables, ChunkedLayersReadVirtualBatches) {
  Planned p(local_case());
  EXPECT_EQ(read(p.fa().full.parts.at(0).page_table, 5), (std::vector<int32_t>{1, 2, 3, 4, 5}));
  ASSERT_EQ(p.fa().local.size(), 1u);
  const FaCall& local = p.fa().local[0].parts.at(0);
  EXPECT_EQ(local.rows, 3);
  EXPECT_EQ(read(local.cu_seqlens_q, 4), (std::vector<int32_t>{0, 1, 5, 6}));
  EXPECT_EQ(read(local.cache_seqlens, 3), (std::vector<int32_t>{4, 4, 1}));
  // k_start 0, 4, 8 -> pages [0, 1], [2, 3], [4, 5 clipped to 4].
  EXPECT_EQ(read(local.page_table, 6), (std::vector<int32_t>{1, 2, 3, 4, 5, 5}));
  EXPECT_TRUE(p.check().empty());
  expect_passes(local_case());
}

// Prefix 6 at ps 4, topk 2, 3 steps, step 1: tail 2, region 8 columns from column 4; branch 0's
// drafts at slots 10, 11 (page 2, the real last page), branch 1's at 18, 19 (page 4, after its
// copy of the tail at 16, 17).
Scenario draft_case() {
  Batch b{Mode::draft_decode, {{0, 0, {}}}, 0, 2, 3, 1, 0, 1};
  return make_case(4, {{LayerKind::full, 0, 0}, {LayerKind::sliding_window, 2, 0}}, {4, 32, 0, 4, 48, false},
                   {admit(0), extend(0, 6)}, b);
}

TEST(FaTables, DraftDecodeTreeReadsWholePrefixPagesThenBranchPages) {
  Planned p(draft_case());
  const FaCall& main = p.fa().full.parts.at(0);
  EXPECT_EQ(read(main.cache_seqlens, 1), (std::vector<int32_t>{4}));  // s - s % ps
  EXPECT_EQ(read(main.page_table, 2), (std::vector<int32_t>{1, 2}));
  const FaCall& expand = p.fa().full.parts.at(1);
  EXPECT_EQ(expand.view_page_size, 4);
  EXPECT_EQ(read(expand.cache_seqlens, 2), (std::vector<int32_t>{4, 4}));  // tail 2 + steps 0..1
  EXPECT_EQ(read(expand.page_table, 6), (std::vector<int32_t>{2, 0, 0, 4, 0, 0}));
  const FaCall& swa = p.fa().sliding.parts.at(0);  // exact window: prefix ++ own drafts
  EXPECT_EQ(read(swa.cache_seqlens, 2), (std::vector<int32_t>{8, 8}));
  EXPECT_EQ(read(swa.page_table, 16), (std::vector<int32_t>{4, 5, 6, 7, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 18, 19}));
  EXPECT_TRUE(p.check().empty());
  expect_passes(draft_case());
}

// Prefix 5, extend 3: DRAFT_EXTEND_V2's seq_len already counts the extend.
Scenario draft_extend_case() {
  Batch b{Mode::draft_extend_v2, {{0, 3, {}}}, 0, 1, 0, 0, 0, 1};
  return make_case(1, {{LayerKind::full, 0, 0}}, {1, 32, 0, 4, 32, false}, {admit(0), extend(0, 5)}, b);
}

TEST(FaTables, DraftExtendV2ReadsSeqLens) {
  Planned p(draft_extend_case());
  EXPECT_EQ(read(p.fa().full.parts.at(0).cache_seqlens, 1), (std::vector<int32_t>{8}));
  EXPECT_EQ(p.fa().full.parts.at(0).max_seqlen_k, 8);
  EXPECT_TRUE(p.check().empty());
}

// --------------------------------------------------------------- broken entries found --

TEST(FaChecks, AWrongPageIdIsPinpointed) {
  Planned p(decode_case());
  p.fa().full.parts.at(0).page_table.set(1, 4);  // row 0, page 1: 3 -> 4
  const auto findings = p.check();
  ASSERT_FALSE(findings.empty());
  EXPECT_EQ(findings[0].property, "stride-divide");
  EXPECT_NE(findings[0].message.find("decode.page_table[1] maps layer 0, row 0 (request 0), key column 4 to slot 16; "
                                     "req_to_token says slot 12"),
            std::string::npos)
      << findings[0].message;
}

TEST(FaChecks, AShortExtentIsPinpointed) {
  Planned p(decode_case());
  p.fa().full.parts.at(0).cache_seqlens.set(1, 5);
  bool found = false;
  for (const auto& f : p.check())
    found |= f.message.find("decode.cache_seqlens[1] (batch row 1) is 5, expected 6") != std::string::npos;
  EXPECT_TRUE(found);
}

TEST(FaChecks, AWrongExpandSlotIsPinpointed) {
  Planned p(verify_case());
  p.fa().full.parts.at(1).page_table.set(13, 8);  // draft 3's second visible key: column 1 (slot 7) -> slot 8
  const auto findings = p.check();
  ASSERT_FALSE(findings.empty());
  EXPECT_NE(findings[0].message.find("target_verify.topk_expand.page_table[13] maps layer 0, row 0 (request 0), key "
                                     "column 4 to slot 8; req_to_token says slot 7"),
            std::string::npos)
      << findings[0].message;
}

TEST(FaChecks, AWrongBranchPageIsPinpointed) {
  Planned p(draft_case());
  p.fa().full.parts.at(1).page_table.set(3, 3);  // branch 1's first page: 4 -> 3
  bool found = false;
  for (const auto& f : p.check())
    found |= f.property == "stride-divide" &&
             f.message.find("draft_decode.topk_expand.page_table[3] maps layer 0, row 0 (request 0), key column 4 "
                            "(req_to_token column 12) to slot 12; req_to_token says slot 16") != std::string::npos;
  EXPECT_TRUE(found);
}

TEST(FaChecks, APaddedRowOutsidePageZeroIsPinpointed) {
  Planned p(decode_case(/*graph_bs=*/3));
  p.fa().full.parts.at(0).page_table.set(16, 5);  // padded row 2, page 0 -> 5
  bool found = false;
  for (const auto& f : p.check())
    found |=
        f.message.find("decode: padded row 2 (kernel row 2) key 0 resolves to slot 20, outside the dummy page 0") !=
        std::string::npos;
  EXPECT_TRUE(found);
}

// Chunked layers split the full call's rows (sglang's _maybe_init_local_attn_metadata): its
// lengths are checked, under no layer, also where no layer reads the full call, so that a wrong
// length is named as itself and roots the chunked layers' findings (properties/root_cause.h).
TEST(FaChecks, TheLengthsChunkedLayersSplitAreCheckedWithoutAFullLayer) {
  const std::string base_message = "draft_extend_v2.cache_seqlens[0] (batch row 0) is 11, expected 8 (too large)";
  auto at = [&](const std::vector<MetadataChecker::Item>& items) {
    std::vector<int32_t> layers;
    for (const auto& f : items)
      if (f.message == base_message) layers.push_back(f.layer);
    return layers;
  };
  Scenario chunked_only = draft_extend_case();  // s = 8 (5 cached + 3 new), chunk 4
  chunked_only.model.layers = {{LayerKind::chunked, 0, 4}};
  EXPECT_TRUE(Planned(chunked_only).check().empty());
  // seq_lens + extend_lens: the full call's lengths are wrong, and so are the virtual batches split
  // from them; the length is named once, under no layer.
  Planned doubled(chunked_only, {"fa_draft_extend_v2_double"});
  EXPECT_EQ(at(doubled.check()), (std::vector<int32_t>{-1}));
  // With a full layer, that layer's check names it: not twice.
  Scenario with_full = chunked_only;
  with_full.model.layers = {{LayerKind::full, 0, 0}, {LayerKind::chunked, 0, 4}};
  EXPECT_EQ(at(Planned(with_full, {"fa_draft_extend_v2_double"}).check()), (std::vector<int32_t>{0}));
  // A plan that does not say its chunked layers split the full call (an adapter's) is not held to it.
  doubled.fa().local.at(0).splits_full = false;
  EXPECT_TRUE(at(doubled.check()).empty());
  // A different bug: virtual batches of a shrunk chunk split right lengths. Their own findings, on
  // the chunked layer, and none under no layer.
  Planned shrunk(local_case(8, 1, 6), {"fa_local_chunk_shrink"});
  const auto findings = shrunk.check();
  ASSERT_FALSE(findings.empty());
  for (const auto& f : findings) EXPECT_EQ(f.layer, 0) << f.message;
}

// ---------------------------------------------------------------------- faults --------

struct FaultCase {
  std::string fault;
  Scenario scenario;
  std::string finding;  // a substring some finding carries
};

std::vector<FaultCase> fault_cases() {
  // The SWA pool diverges: request 0's evicted SWA slots 1..4 queue behind 5..8, so request 1's
  // drafts get SWA slots 8, 1, 2, 3 against full slots 8..11.
  Scenario verify_swa = verify_case();
  verify_swa.model.layers[1].window = 0;
  verify_swa.cache.swa_pages = 8;
  verify_swa.history = {admit(0), extend(0, 4), swa_evict(0), admit(1), extend(1, 3)};
  verify_swa.batch.entries = {{1, 0, {-1, 0, 0, 1}}};
  Scenario verify_sinks = verify_case();  // gpt-oss's sinks on a topk>1 cascade
  verify_sinks.model.sinks = {1.5, -0.5};
  return {
      {"fa_local_token_table", local_case(), "extend.local4.local_block_table"},
      {"fa_local_chunk_shrink", local_case(8, 1, 6), "extend.local8"},  // s = 7 -> chunk shrinks to 6
      {"fa_swa_spec_untranslated", verify_swa, "target_verify.topk_swa.page_table"},
      {"fa_draft_extend_v2_double", draft_extend_case(),
       "draft_extend_v2.cache_seqlens[0] (batch row 0) is 11, expected 8"},
      {"fa_draft_extend_v2_prefix", draft_extend_case(),
       "draft_extend_v2.cache_seqlens[0] (batch row 0) is 5, expected 8"},
      {"fa_swa_page_id_translate", swa_case(), "decode.swa_page_table"},
      {"fa_expand_paged_view", verify_case(4), "target_verify.topk_expand.page_table holds token slots"},
      {"fa_sink_every_part", verify_sinks, "attention sinks on 2 of its 2 merged calls, expected 1"},
  };
}

TEST(FaFaults, EveryFaultIsListed) {
  std::vector<std::string> names;
  for (const FaultInfo& f : fa_backend().faults()) names.push_back(f.name);
  std::vector<std::string> want;
  for (const FaultCase& c : fault_cases()) want.push_back(c.fault);
  EXPECT_EQ(names, want);
}

TEST(FaFaults, EachFaultBreaksItsHandCase) {
  for (const FaultCase& c : fault_cases()) {
    const CaseContext ctx(c.scenario);
    EXPECT_TRUE(check_case(ctx, fa_backend()).findings.empty()) << c.fault << ": the case must pass without the fault";
    const CheckResult r = check_case(ctx, fa_backend(), {c.fault});
    bool named = false;
    for (const Finding& f : r.findings) named |= f.message.find(c.finding) != std::string::npos;
    EXPECT_TRUE(named) << c.fault << " not reported as \"" << c.finding << "\":\n" << describe(r.findings);
  }
}

TEST(FaFaults, EachFaultIsDetectedOnGeneratedCases) {
  const uint64_t budget = 4000;
  for (const FaultInfo& f : fa_backend().faults()) {
    // Small cases have no attention sinks: the sink fault is looked for on gpt-oss-shaped ones.
    const Profile profile = f.name == "fa_sink_every_part" ? Profile::gpt_oss : Profile::small;
    uint64_t seed = 0;
    std::vector<Finding> found;
    for (; seed < budget && found.empty(); ++seed)
      found = check_case(CaseContext(generate(seed, profile)), fa_backend(), {f.name}).findings;
    ASSERT_FALSE(found.empty()) << f.name << " went undetected over " << budget << " small cases";
    std::printf("  %-28s detected after %3llu %s cases: %s\n", f.name.c_str(), static_cast<unsigned long long>(seed),
                std::string(to_string(profile)).c_str(), found[0].property.c_str());
  }
}

// -------------------------------------------------------------- generated cases --------

void sweep(Profile profile, int64_t cases) {
  int ran = 0;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t seed = 0; seed < static_cast<uint64_t>(cases); ++seed) {
    const CaseContext ctx(generate(seed, profile));
    const CheckResult r = check_case(ctx, fa_backend());
    ran += r.support.ok;
    if (!r.findings.empty()) ADD_FAILURE() << to_string(profile) << " seed " << seed << ":\n" << describe(r.findings);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("  %lld %s cases, %d supported, %.0f cases/s (oracle included)\n", static_cast<long long>(cases),
              std::string(to_string(profile)).c_str(), ran, static_cast<double>(cases) / seconds);
  EXPECT_EQ(ran, cases);
}

TEST(FaGenerated, PassesTinyCases) { sweep(Profile::tiny, testing::test_cases(2000)); }
TEST(FaGenerated, PassesSmallCases) { sweep(Profile::small, testing::test_cases(1000)); }
// fp8 descales in the plan (FaPlan::descales, descales.h): the executor attends with stored values
// times them and check_metadata holds them against the layer's scales. The layer's own scales give
// the plan-less result bit for bit; k and v swapped change the output and are named; a descale
// list of the wrong length is a Violation, not a silent fall-back to the layer's scale.
TEST(FaDescales, ConsumedByTheExecutorAndCheckedAgainstTheLayer) {
  int checked = 0;
  for (uint64_t seed = 1; seed < 40 && checked < 3; ++seed) {
    const Scenario s = generate(seed, Profile::fp8);
    const Layer& l0 = s.model.layers.front();
    if (s.model.mla || l0.k_scale == l0.v_scale || !fa_backend().supports(s).ok) continue;
    const CaseContext ctx(s);
    const Prepared& p = ctx.prepared();
    std::unique_ptr<Plan> planned = fa_backend().plan({s, p.cache, ctx.batch(), {}});
    auto& plan = static_cast<FaPlan&>(*planned);
    auto run = [&] {
      KvPools pools(s, p.cache, ctx.values());
      RunOutput out(s, p.batch);
      fa_backend().run(plan, {s, p.cache, p.batch, pools, ctx.tensors()}, out);
      return out.out;
    };
    const std::vector<float> want = run();
    auto set = [&](bool swapped) {
      plan.descales.clear();
      for (int32_t l = 0; l < static_cast<int32_t>(s.model.layers.size()); ++l) {
        const Layer& layer = s.model.layers[static_cast<size_t>(l)];
        LayerDescales d;
        for (const FaCall& c : plan.group_of(l).parts) {
          const auto n = static_cast<size_t>(c.rows * s.model.kv_heads);
          d.parts.push_back({std::vector<double>(n, 1.0),
                             std::vector<double>(n, swapped ? layer.v_scale : layer.k_scale),
                             std::vector<double>(n, swapped ? layer.k_scale : layer.v_scale)});
        }
        plan.descales.push_back(d);
      }
    };
    set(false);
    EXPECT_EQ(run(), want) << "seed " << seed;
    EXPECT_TRUE(metadata_findings(ctx, plan).empty()) << "seed " << seed;
    set(true);
    EXPECT_NE(run(), want) << "seed " << seed;
    const auto found = metadata_findings(ctx, plan);
    ASSERT_FALSE(found.empty()) << "seed " << seed;
    EXPECT_NE(found.front().message.find("is handed k_descale[0][0] = "), std::string::npos) << found.front().message;
    set(false);
    plan.descales.front().parts.front().k.pop_back();
    EXPECT_THROW(run(), Violation) << "seed " << seed;
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

TEST(FaGenerated, PassesMediumCases) { sweep(Profile::medium, testing::test_cases(50)); }
TEST(FaGenerated, PassesGptOssCasesWithSinks) { sweep(Profile::gpt_oss, testing::test_cases(100)); }

}  // namespace
}  // namespace kvfuzz
