// Tests of backends/mla/: hand-checked metadata on small cases, a hand-broken entry the checks
// pinpoint, the generated-case sweep, and each planner fault detected on generated cases.
//
// Only ~1/8 of generated models are MLA; the sweeps also turn every generated model into an MLA
// one (one latent KV head, v_head_dim <= head_dim) and keep the cases that still validate.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <chrono>
#include <optional>

#include "backends/mla/mla_backend.h"
#include "backends/mla/mla_faults.h"
#include "backends/mla/mla_plan.h"
#include "backends/tests/backend_test_util.h"
#include "properties/check.h"
#include "properties/metamorphic.h"
#include "reference/generate.h"
#include "reference/scenario_json.h"
#include "reference/tests/test_level.h"
#include "reference/validate.h"

namespace kvfuzz {
namespace {

using mla::MlaPlan;

// ---------------------------------------------------------------------------- helpers --

Scenario small_mla(int32_t page_size, int32_t full_pages, int32_t max_requests, int32_t max_context) {
  Scenario s;
  s.model.q_heads = 2;
  s.model.kv_heads = 1;
  s.model.head_dim = 6;
  s.model.v_head_dim = 4;
  s.model.mla = true;
  s.model.sm_scale = 0.25;
  s.model.layers = {Layer{}};
  s.cache = {page_size, full_pages, 0, max_requests, max_context, false};
  s.values.seed = 7;
  return s;
}

using testing::admit;
using testing::extend;
using testing::metadata_findings;
using testing::release;

// A generated model turned into an MLA one; nullopt when the case no longer validates.
std::optional<Scenario> as_mla(Scenario s) {
  s.model.mla = true;
  s.model.kv_heads = 1;
  s.model.v_head_dim = std::min(s.model.v_head_dim, s.model.head_dim);
  if (!is_valid(s)) return std::nullopt;
  return s;
}

// The same case on a server whose context is exactly full: the smallest max_context_len that
// still validates (the generator leaves 2 * ps + 1 columns of room, hiding near-full overflows).
Scenario tighten_context(Scenario s) {
  int32_t lo = 1, hi = s.cache.max_context_len;
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo) / 2;
    Scenario t = s;
    t.cache.max_context_len = mid;
    if (is_valid(t)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  s.cache.max_context_len = hi;
  return s;
}

struct Planned {
  Prepared prepared;
  std::unique_ptr<Plan> plan;
  const MlaPlan& mla() const { return dynamic_cast<const MlaPlan&>(*plan); }
};

Planned plan_of(const Scenario& s, const std::vector<std::string>& faults = {}) {
  validate(s);
  Planned p{prepare(s), nullptr};
  p.plan = mla_backend().plan({s, p.prepared.cache, p.prepared.batch, faults});
  return p;
}

std::string describe(const CheckResult& r) { return testing::describe(r.findings, r.findings.size()); }

// Two decoding requests among a freed one, page size 4, so page 4 is reused (LIFO):
//   request 0 (row 1): columns 0..5 in pages 1, 2        -> decodes column 6 into slot 10
//   request 1 (row 2): columns 0..2 page 3, 3 slot 15, 4 on the reused page 4 (slot 16)
//                                                         -> decodes column 5 into slot 17
//   request 3 (row 3, the freed row): column 0 on page 5 -> decodes column 1 into slot 21
Scenario reused_page_decode() {
  Scenario s = small_mla(4, 8, 3, 16);
  s.history = {admit(0), extend(0, 6), admit(1), extend(1, 3), admit(2), extend(2, 4), release(2), extend(1, 2),
               admit(3), extend(3, 1)};
  s.batch.mode = Mode::decode;
  s.batch.entries = {{1, 0, {}}, {0, 0, {}}, {3, 0, {}}};
  return s;
}

// ------------------------------------------------------------------ hand-checked plans --

TEST(MlaPlan, DecodeBlockTableStridesThenDivides) {
  const Planned p = plan_of(reused_page_decode());
  const mla::LatentDecodeMeta& d = p.mla().decode;
  ASSERT_EQ(p.mla().path, mla::MlaPath::latent_decode);
  EXPECT_EQ(d.rows, 3);
  EXPECT_EQ(d.width, 2);  // eager: ceil(max seq_len 7 / 4)
  EXPECT_EQ(d.block_table.prefix(6), (std::vector<int32_t>{3, 4, 1, 2, 5, -1}));  // eager fill -1
  EXPECT_EQ(d.cache_seqlens.prefix(3), (std::vector<int32_t>{6, 7, 2}));
  EXPECT_EQ(d.cu_seqlens_q.prefix(4), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(d.max_seqlen_k, 7);
  EXPECT_EQ(d.block_table.capacity(), 6);  // eager buffers are exact
}

TEST(MlaPlan, GraphBlockTableIsPrefilledWithPageOneAndPaddedRowsReadPageZero) {
  Scenario s = reused_page_decode();
  s.batch.graph_bs = 4;
  const Planned p = plan_of(s);
  const mla::LatentDecodeMeta& d = p.mla().decode;
  EXPECT_EQ(d.width, 5);  // (max_context_len + ps) / ps, allocated at capture
  EXPECT_EQ(d.block_table.prefix(20), (std::vector<int32_t>{3, 4, 1, 1, 1,    // request 1
                                                            1, 2, 1, 1, 1,    // request 0
                                                            5, 1, 1, 1, 1,    // request 3
                                                            0, 1, 1, 1, 1}));  // padded: dummy page 0
  EXPECT_EQ(d.cache_seqlens.prefix(4), (std::vector<int32_t>{6, 7, 2, 1}));  // fill value 1
  // The 1s past each row's pages name page 1, a live page of request 0: never read, because
  // entries beyond cache_seqlens are never read.
  CaseContext ctx(s);
  const CheckResult r = check_case(ctx, mla_backend());
  EXPECT_TRUE(r.findings.empty()) << describe(r);
}

// vLLM's padding (empty_padded_rows): a padded row has no queries and no keys; one that reads a
// key is a metadata finding naming its cache_seqlens entry.
TEST(MlaPlan, EmptyPaddedRowsMustReadNothing) {
  Scenario s = reused_page_decode();
  s.batch.graph_bs = 4;
  CaseContext ctx(s);
  Planned p = plan_of(s);
  auto& d = const_cast<mla::LatentDecodeMeta&>(p.mla().decode);
  d.empty_padded_rows = true;
  d.cache_seqlens.set(3, 0);
  d.cu_seqlens_q.set(4, 3);
  EXPECT_TRUE(metadata_findings(ctx, *p.plan).empty());
  d.cache_seqlens.set(3, 1);
  const auto findings = metadata_findings(ctx, *p.plan);
  ASSERT_FALSE(findings.empty());
  EXPECT_NE(findings[0].message.find("cache_seqlens[3] is 1, expected 0"), std::string::npos) << findings[0].message;
}

// A tree of D = 3 (root, two children) after a 3-token prefix, page size 1.
Scenario tree_verify() {
  Scenario s = small_mla(1, 16, 1, 12);
  s.history = {admit(0), extend(0, 3)};
  s.batch = testing::tree_verify_batch(2, {-1, 0, 0});
  return s;
}

TEST(MlaPlan, VerifyReadsPrefixPlusDraftsThroughTheTreeMask) {
  const Planned p = plan_of(tree_verify());
  const mla::LatentDecodeMeta& d = p.mla().decode;
  EXPECT_EQ(d.cache_seqlens.prefix(1), (std::vector<int32_t>{6}));  // seq_len + D
  EXPECT_EQ(d.block_table.prefix(6), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(d.cu_seqlens_q.prefix(2), (std::vector<int32_t>{0, 3}));
  EXPECT_TRUE(d.tree_mask);
  EXPECT_EQ(d.custom_mask.prefix(18), (std::vector<uint8_t>{1, 1, 1, 1, 0, 0,    // root
                                                           1, 1, 1, 1, 1, 0,    // child 1
                                                           1, 1, 1, 1, 0, 1}));  // child 2: not its sibling
  EXPECT_EQ(p.mla().positions.prefix(3), (std::vector<int32_t>{3, 4, 4}));
  CaseContext ctx(tree_verify());
  const CheckResult r = check_case(ctx, mla_backend());
  EXPECT_TRUE(r.findings.empty()) << describe(r);
}

// Drafting at page size 4, topk 2, 2 steps, step 1, after a 6-token prefix (pages 1, 2):
// base = 4, each branch owns one page starting with its copy of columns 4..5; branch 0's region
// is the real last page 2 (columns 4..7), branch 1's is page 3 (columns 8..11).
Scenario paged_branches() {
  Scenario s = small_mla(4, 8, 1, 16);
  s.history = {admit(0), extend(0, 6)};
  s.batch = testing::draft_decode_batch(2, 2, 1);
  return s;
}

TEST(MlaPlan, DraftDecodeRowsArePrefixPlusOwnBranchRegion) {
  const Planned p = plan_of(paged_branches());
  const mla::LatentDecodeMeta& d = p.mla().decode;
  EXPECT_EQ(d.rows, 2);
  EXPECT_EQ(d.steps, 2);
  EXPECT_EQ(d.width, 2);  // ceil((6 + 2) / 4)
  // [step][row][page]: every step's table is filled, as the multi-step backend does.
  EXPECT_EQ(d.block_table.prefix(8), (std::vector<int32_t>{1, 2, 1, 3, 1, 2, 1, 3}));
  EXPECT_EQ(d.cache_seqlens.prefix(4), (std::vector<int32_t>{7, 7, 8, 8}));
  EXPECT_EQ(d.table_row(1), 6);  // step 1, branch 1
  CaseContext ctx(paged_branches());
  const CheckResult r = check_case(ctx, mla_backend());
  EXPECT_TRUE(r.findings.empty()) << describe(r);
}

// Prefill at page size 2: request 0 has 3 cached tokens (slots 2, 3, 4) and extends by 2
// (slots 5, then page 3: 6); request 1 is new and extends by 3 (pages 4, 5: slots 8, 9, 10).
Scenario two_row_extend() {
  Scenario s = small_mla(2, 8, 2, 8);
  s.history = {admit(0), extend(0, 3), admit(1)};
  s.batch.mode = Mode::extend;
  s.batch.entries = {{0, 2, {}}, {1, 3, {}}};
  return s;
}

TEST(MlaPlan, PrefillGathersTokensAndDescribesTheLinearBufferWithBlockSizeOne) {
  const Planned p = plan_of(two_row_extend());
  const mla::PrefillMeta& m = p.mla().prefill;
  ASSERT_EQ(p.mla().path, mla::MlaPath::prefill);
  EXPECT_EQ(m.qo_indptr.prefix(3), (std::vector<int32_t>{0, 2, 5}));
  EXPECT_EQ(m.kv_indptr.prefix(3), (std::vector<int32_t>{0, 5, 8}));
  EXPECT_EQ(m.kv_indices.prefix(8), (std::vector<int32_t>{2, 3, 4, 5, 6, 8, 9, 10}));
  EXPECT_EQ(m.block_size, 1);
  EXPECT_EQ(m.linear_kv_indptr.prefix(3), (std::vector<int32_t>{0, 5, 8}));
  EXPECT_EQ(m.linear_kv_indices.prefix(8), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(p.mla().positions.prefix(5), (std::vector<int32_t>{3, 4, 0, 1, 2}));
  CaseContext ctx(two_row_extend());
  const CheckResult r = check_case(ctx, mla_backend());
  EXPECT_TRUE(r.findings.empty()) << describe(r);
}

TEST(MlaPlan, WindowsAndChunksAreMasksOnPositions) {
  for (Layer layer : {Layer{LayerKind::sliding_window, 2, 0}, Layer{LayerKind::chunked, 0, 4}}) {
    for (Scenario s : {reused_page_decode(), two_row_extend(), paged_branches()}) {
      s.model.layers = {Layer{}, layer};
      CaseContext ctx(s);
      const CheckResult r = check_case(ctx, mla_backend());
      EXPECT_TRUE(r.findings.empty()) << to_string(layer.kind) << " " << to_string(s.batch.mode) << "\n" << describe(r);
    }
  }
}

TEST(MlaPlan, RefusesModelsWithoutALatentCache) {
  Scenario s = reused_page_decode();
  s.model.mla = false;
  EXPECT_FALSE(mla_backend().supports(s).ok);
  EXPECT_TRUE(mla_backend().supports(reused_page_decode()).ok);
}

// --------------------------------------------------------------- broken metadata caught --

TEST(MlaPlan, ChecksPinpointAHandBrokenBlockTableEntry) {
  const Scenario s = reused_page_decode();
  CaseContext ctx(s);
  Planned p = plan_of(s);
  auto& table = const_cast<Buffer<int32_t>&>(p.mla().decode.block_table);
  table.set(1, 5);  // request 1's page 1: page 4 (slots 16, 17) -> page 5, request 3's page
  const auto findings = metadata_findings(ctx, *p.plan);
  ASSERT_FALSE(findings.empty());
  EXPECT_EQ(findings[0].property, "stride-divide");
  EXPECT_NE(findings[0].message.find("block_table[1] maps layer 0, row 0 (request 1), key column 4 to slot 20"),
            std::string::npos)
      << findings[0].message;
}

TEST(MlaPlan, ChecksPinpointABrokenBranchRegionPage) {
  const Scenario s = paged_branches();
  CaseContext ctx(s);
  Planned p = plan_of(s);
  auto& table = const_cast<Buffer<int32_t>&>(p.mla().decode.block_table);
  table.set(7, 2);  // step 1, branch 1's region: page 3 -> page 2, branch 0's
  const auto findings = metadata_findings(ctx, *p.plan);
  ASSERT_FALSE(findings.empty());
  EXPECT_EQ(findings[0].property, "stride-divide");
  EXPECT_EQ(findings[0].message,
            "block_table[7] maps layer 0, row 0 (request 0), key column 4 (req_to_token column 8) to slot 8; "
            "req_to_token says slot 12");
}

TEST(MlaPlan, ChecksPinpointAHandBrokenDescriptorAndGatherEntry) {
  const Scenario s = two_row_extend();
  CaseContext ctx(s);
  Planned p = plan_of(s);
  auto& m = const_cast<mla::PrefillMeta&>(p.mla().prefill);
  m.kv_indices.set(6, 4);         // row 1, key 1 gathers request 0's slot 4
  m.linear_kv_indices.set(3, 2);  // row 0, key 3 resolves to linear entry 2
  const auto findings = metadata_findings(ctx, *p.plan);
  std::string all;
  for (const auto& f : findings) all += f.message + "\n";
  EXPECT_NE(all.find("kv_indices[6] maps layer 0, row 1 (request 1), key column 1 to slot 4"), std::string::npos)
      << all;
  // Read through the descriptor, then the gather: the general stride-divide property names it.
  EXPECT_NE(all.find("linear_kv_indices -> kv_indices[3] maps layer 0, row 0 (request 0), key column 3 to slot 4; "
                     "req_to_token says slot 5"),
            std::string::npos)
      << all;
}

// ------------------------------------------------------------------- generated sweeps --

// Generated cases that run on mla: the MLA ones as generated, and the rest turned MLA.
template <class Each>
int64_t for_generated_mla(int64_t seeds, Profile profile, Each each) {
  int64_t kept = 0;
  for (int64_t seed = 0; seed < seeds; ++seed) {
    auto s = as_mla(generate(static_cast<uint64_t>(seed), profile));
    if (!s) continue;
    ++kept;
    each(static_cast<uint64_t>(seed), *s);
  }
  return kept;
}

TEST(MlaSweep, EveryGeneratedCasePassesWithoutFaults) {
  for (Profile profile : {Profile::tiny, Profile::small}) {
    int64_t failed = 0, ran = 0;
    double backend_seconds = 0;
    ran = for_generated_mla(testing::test_cases(1500), profile, [&](uint64_t seed, const Scenario& s) {
      CaseContext ctx(s);
      const auto t0 = std::chrono::steady_clock::now();
      BackendRun run = run_backend(ctx, mla_backend());
      backend_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const CheckResult r = check_run(ctx, mla_backend(), run);
      if (!r.findings.empty() && failed++ < 3)
        ADD_FAILURE() << to_string(profile) << " seed " << seed << "\n" << describe(r) << to_json(s);
    });
    EXPECT_EQ(failed, 0);
    std::cout << to_string(profile) << ": " << ran << " MLA cases, " << failed << " with findings, "
              << static_cast<int64_t>(ran / std::max(backend_seconds, 1e-9)) << " cases/s (plan + run)\n";
  }
}

TEST(MlaSweep, NaturallyGeneratedMlaCasesPass) {
  int64_t ran = 0;
  for (uint64_t seed = 0; seed < static_cast<uint64_t>(testing::test_cases(4000)); ++seed) {
    const Scenario s = generate(seed, Profile::small);
    if (!s.model.mla) continue;
    ++ran;
    CaseContext ctx(s);
    const CheckResult r = check_case(ctx, mla_backend());
    ASSERT_TRUE(r.findings.empty()) << "seed " << seed << "\n" << describe(r);
  }
  EXPECT_GT(ran, 0);
}

TEST(MlaSweep, MetamorphicVariantsAgree) {
  int64_t failed = 0;
  for_generated_mla(testing::test_cases(400), Profile::small, [&](uint64_t seed, const Scenario& s) {
    CaseContext ctx(s);
    const BackendRun run = run_backend(ctx, mla_backend());
    const std::vector<Finding> f = check_metamorphic(ctx, run, mla_backend(), {}, seed);
    if (!f.empty() && failed++ < 3) ADD_FAILURE() << "seed " << seed << ": " << f[0].message;
  });
  EXPECT_EQ(failed, 0);
}

RC_GTEST_PROP(MlaSweep, AnyGeneratedSeedPasses, (uint64_t seed)) {
  const auto s = as_mla(generate(seed, Profile::tiny));
  RC_PRE(s.has_value());
  CaseContext ctx(*s);
  const CheckResult r = check_case(ctx, mla_backend());
  RC_ASSERT(r.findings.empty());
}

// ----------------------------------------------------------------------------- faults --

// Fault sweeps keep at least 1000 seeds at every test level: detection must not depend on luck.
int64_t fault_seeds(int64_t base) { return std::max<int64_t>(1000, testing::test_cases(base)); }

struct FaultRate {
  int64_t cases = 0, detected = 0;
  std::string example;
};

template <class Transform>
FaultRate fault_rate(std::string_view fault, int64_t seeds, Transform transform) {
  FaultRate rate;
  const std::vector<std::string> faults{std::string(fault)};
  for_generated_mla(seeds, Profile::small, [&](uint64_t, const Scenario& generated) {
    const std::optional<Scenario> s = transform(generated);
    if (!s) return;
    ++rate.cases;
    CaseContext ctx(*s);
    const CheckResult r = check_case(ctx, mla_backend(), faults);
    if (r.findings.empty()) return;
    if (rate.detected++ == 0) rate.example = describe(r);
  });
  return rate;
}

std::optional<Scenario> unchanged(const Scenario& s) { return s; }

TEST(MlaFaults, AreDeclared) {
  std::vector<std::string> names;
  for (const FaultInfo& f : mla_backend().faults()) names.push_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{std::string(mla::kFaultPrefillBlockSizePage),
                                             std::string(mla::kFaultGraphKvIndicesPages),
                                             std::string(mla::kFaultGraphVerifyNoDraftRoom),
                                             std::string(mla::kFaultDraftGraphNoTopk)}));
}

TEST(MlaFaults, PrefillBlockSizePageIsDetected) {
  const FaultRate r = fault_rate(mla::kFaultPrefillBlockSizePage, fault_seeds(1000), unchanged);
  EXPECT_GT(r.detected, 0);
  // Caught by the general stride-divide property first (the descriptor read through the gather).
  EXPECT_NE(r.example.find("linear_kv_indices -> kv_indices: key column 0 of row 1"), std::string::npos) << r.example;
  std::cout << "block size page: " << r.detected << " of " << r.cases << " cases\n";
  // By hand: two prefill rows at page size 2; row 1's key 0 resolves to linear entry 10 of 8.
  CaseContext ctx(two_row_extend());
  const CheckResult h = check_case(ctx, mla_backend(), {std::string(mla::kFaultPrefillBlockSizePage)});
  EXPECT_NE(describe(h).find("linear_kv: read at index 10, outside its capacity 8"), std::string::npos) << describe(h);
}

TEST(MlaFaults, GraphKvIndicesInPagesIsDetected) {
  const FaultRate r = fault_rate(mla::kFaultGraphKvIndicesPages, fault_seeds(1000), unchanged);
  EXPECT_GT(r.detected, 0);
  EXPECT_NE(r.example.find("kv_indices: write at index"), std::string::npos) << r.example;
  std::cout << "graph kv_indices in pages: " << r.detected << " of " << r.cases << " cases\n";
}

TEST(MlaFaults, GraphVerifyWithoutDraftRoomIsDetected) {
  // As generated (contexts keep room past the longest request) and on full contexts.
  const FaultRate natural = fault_rate(mla::kFaultGraphVerifyNoDraftRoom, fault_seeds(4000), unchanged);
  const FaultRate full = fault_rate(mla::kFaultGraphVerifyNoDraftRoom, fault_seeds(1000),
                                    [](const Scenario& s) -> std::optional<Scenario> {
                                      if (s.batch.mode != Mode::target_verify) return std::nullopt;
                                      const auto bs = static_cast<int32_t>(s.batch.entries.size());
                                      if (s.batch.graph_bs <= bs) return std::nullopt;
                                      return tighten_context(s);
                                    });
  EXPECT_GT(natural.detected + full.detected, 0);
  EXPECT_GT(full.detected, 0) << "no near-full verify case detected";
  std::cout << "graph verify without draft room: " << natural.detected << " of " << natural.cases
            << " generated cases; " << full.detected << " of " << full.cases << " graph verify cases at full context\n";
}

TEST(MlaFaults, DraftGraphWithoutTopkIsDetected) {
  const FaultRate r = fault_rate(mla::kFaultDraftGraphNoTopk, fault_seeds(1000), unchanged);
  EXPECT_GT(r.detected, 0);
  EXPECT_NE(r.example.find("block_table: write at index"), std::string::npos) << r.example;
  std::cout << "draft graph without topk: " << r.detected << " of " << r.cases << " cases\n";
}

}  // namespace
}  // namespace kvfuzz
