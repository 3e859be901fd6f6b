// Decode-context parallelism in the page_table family (FaGroup::dcp_world, fa::FaCall::rank_slots: the
// shape vLLM's FlashAttention backend runs under --decode-context-parallel-size, adapters/vllm/dcp.py):
// a test-only backend turns kvfuzz's fa plan into R ranks' context calls, each reading its own
// pool (the interleaved layout: column p on rank (p / I) % R) through its block table and local
// lengths, then the new tokens' call, merged by LSE; every property holds. Planted mistakes are
// caught: a rank reading another rank's slots, local lengths without the remainder, and the ranks'
// partial outputs merged without their LSE weights (an average). Their findings, and those of the
// batch-order variant on context lost after a context-free row (vLLM's FA2 split path), carry the ranks
// into their fingerprints (Finding::dcp_world, context dcp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/common/paged_view.h"
#include "backends/fa/fa_backend.h"
#include "backends/fa/fa_plan.h"
#include "backends/fa/fa_tables.h"
#include "backends/tests/backend_test_util.h"
#include "properties/check.h"
#include "properties/fingerprint.h"
#include "properties/metamorphic.h"

namespace kvfuzz {
namespace {

// unordered_context: rows after the first row without context get none (vLLM's FA2 split context path
// on a batch not ordered decodes, extends, prefills: kvfuzz-vllm-dcp-fa2-unordered-context).
enum class DcpMistake {
  none,
  reads_other_rank,
  no_remainder,
  merge_split_by_lse,
  merge_without_lse,
  unordered_context
};

constexpr int32_t kRanks = 2, kInterleave = 2;

// Local offset j of a rank's block -> offset inside kvfuzz's page (the rank's block of page P holds
// the page's columns o with (o / I) % R == rank, in order).
int32_t page_offset(int32_t j, int32_t rank) {
  return j / kInterleave * kRanks * kInterleave + rank * kInterleave + j % kInterleave;
}

// Keys of the first `context` columns that rank `rank` holds.
int32_t local_len(int32_t context, int32_t rank, bool remainder) {
  const int32_t base = context / kInterleave / kRanks * kInterleave;
  if (!remainder) return base;
  return base + std::clamp(context - base * kRanks - rank * kInterleave, 0, kInterleave);
}

class DcpFa : public Backend {
 public:
  explicit DcpFa(DcpMistake mistake) : mistake_(mistake) {}
  std::string_view name() const override { return "fa_dcp"; }
  std::string_view summary() const override { return "fa as decode-context parallel ranks (test only)"; }
  std::string_view family() const override { return "page_table"; }
  Support supports(const Scenario& s) const override {  // a rank's block holds whole interleave runs
    if (s.cache.page_size % (kRanks * kInterleave) != 0) return Support::no("page size not a multiple of R x I");
    return fa_backend().supports(s);
  }

  std::unique_ptr<Plan> plan(const PlanInput& in) const override {
    auto plan = fa_backend().plan(in);
    fa::FaGroup& g = static_cast<fa::FaPlan&>(*plan).full;
    const fa::FaCall whole = g.parts.at(0);
    const int32_t ps = whole.view_page_size, block = ps / kRanks;
    const int64_t pool_pages = in.scenario.cache.full_pages;
    std::vector<fa::FaCall> parts;
    for (int32_t r = 0; r < kRanks; ++r) {
      fa::FaCall c =
          fa::make_call("dcp.rank" + std::to_string(r), "dcp.rank.page_table", whole.rows, whole.width, block, false);
      for (int64_t e = 0; e < int64_t{whole.rows} * whole.width; ++e) c.page_table.set(e, whole.page_table[e]);
      const int32_t holder = mistake_ == DcpMistake::reads_other_rank && r == 0 ? 1 : r;
      c.rank_slots = Buffer<int64_t>("dcp.rank.rank_slots", pool_pages * block);
      for (int64_t page = 0; page < pool_pages; ++page)
        for (int32_t j = 0; j < block; ++j) c.rank_slots.set(page * block + j, page * ps + page_offset(j, holder));
      bool lost = false;  // unordered_context: a row without context came before
      for (int32_t b = 0; b < whole.rows; ++b) {
        const int32_t context = whole.cache_seqlens[b] - whole.q_len(b);
        fa::set_row(c, b, whole.cu_seqlens_q[b], whole.q_len(b),
                    lost ? 0 : local_len(context, r, mistake_ != DcpMistake::no_remainder));
        lost |= mistake_ == DcpMistake::unordered_context && context == 0;
      }
      fa::finish_call(c, whole.rows);
      parts.push_back(std::move(c));
    }
    int32_t width = 1;
    for (int32_t b = 0; b < whole.rows; ++b) width = std::max(width, whole.q_len(b));
    fa::FaCall step = fa::make_call("dcp.step", "dcp.step.page_table", whole.rows, width, 1, true);
    for (int32_t b = 0; b < whole.rows; ++b) {
      const int32_t context = whole.cache_seqlens[b] - whole.q_len(b);
      for (int32_t k = 0; k < whole.q_len(b); ++k)
        step.page_table.set(int64_t{b} * width + k, static_cast<int32_t>(page_table_slot(
                                                        whole.page_table, int64_t{b} * whole.width, context + k, ps)));
      fa::set_row(step, b, whole.cu_seqlens_q[b], whole.q_len(b), whole.q_len(b));
    }
    fa::finish_call(step, whole.rows);
    parts.push_back(std::move(step));
    g.parts = std::move(parts);
    g.dcp_world = kRanks;
    g.dcp_interleave = kInterleave;
    return plan;
  }

  // The executor's LSE merge, or each part run alone and the outputs merged here: by their LSE
  // weights (as the executor does: must pass) or by a plain average (the planted mistake).
  void run(const Plan& plan, const RunInput& in, RunOutput& out) const override {
    if (mistake_ != DcpMistake::merge_split_by_lse && mistake_ != DcpMistake::merge_without_lse)
      return fa_backend().run(plan, in, out);
    const auto& whole = static_cast<const fa::FaPlan&>(plan);
    std::vector<RunOutput> runs;
    for (const fa::FaCall& part : whole.full.parts) {
      fa::FaPlan one = whole;
      one.full.parts = {part};
      runs.emplace_back(in.scenario, in.batch);
      fa_backend().run(one, in, runs.back());
    }
    for (int32_t l = 0; l < out.layers; ++l)
      for (int64_t t = 0; t < out.num_tokens; ++t) {
        for (const RunOutput& r : runs)
          for (const Read& read : r.reads.reads(l, t)) out.reads.record(l, t, read);
        for (int32_t h = 0; h < out.q_heads; ++h) merge(runs, l, t, h, out);
      }
  }

 private:
  void merge(const std::vector<RunOutput>& runs, int32_t l, int64_t t, int32_t h, RunOutput& out) const {
    double top = -std::numeric_limits<double>::infinity();
    int32_t seen = 0;
    for (const RunOutput& r : runs)
      if (std::isfinite(r.lse_at(l, t, h))) top = std::max(top, double{r.lse_at(l, t, h)}), ++seen;
    double total = 0;
    std::vector<double> weight;
    for (const RunOutput& r : runs) {
      const bool any = std::isfinite(r.lse_at(l, t, h));
      weight.push_back(!any                                        ? 0.0
                       : mistake_ == DcpMistake::merge_without_lse ? 1.0
                                                                   : std::exp(r.lse_at(l, t, h) - top));
      total += weight.back();
    }
    float* o = out.out_at(l, t, h);
    for (int32_t d = 0; d < out.v_head_dim; ++d) {
      double sum = 0;
      for (size_t i = 0; i < runs.size(); ++i) sum += weight[i] * runs[i].out_at(l, t, h)[d];
      o[d] = seen ? static_cast<float>(sum / total) : 0.0f;
    }
    double lse_sum = 0;
    for (const RunOutput& r : runs)
      if (std::isfinite(r.lse_at(l, t, h))) lse_sum += std::exp(r.lse_at(l, t, h) - top);
    out.lse_at(l, t, h) = seen ? static_cast<float>(top + std::log(lse_sum)) : -std::numeric_limits<float>::infinity();
  }

  DcpMistake mistake_;
};

// Page size 8 (two ranks' blocks of 4, interleave 2); a mixed batch of a decode row, an extend over
// a context that ends inside an interleave run, and a first chunk with no context.
Scenario dcp_case() {
  Scenario s;
  s.model = {4, 2, 8, 8, false, 0.35, 0.0, {{LayerKind::full, 0, 0}, {LayerKind::full, 0, 0}}, {}};
  s.cache = {8, 24, 0, 4, 48, false};
  s.history = {testing::admit(3), testing::extend(3, 5), testing::release(3), testing::admit(0), testing::extend(0, 19), testing::admit(1), testing::extend(1, 13), testing::admit(2)};
  s.batch.mode = Mode::mixed;
  s.batch.entries = {{0, 1, {}}, {1, 3, {}}, {2, 6, {}}};
  s.values.seed = 28;
  return s;
}

TEST(FaDcp, PassesEveryPropertyAcrossRanks) {
  const CaseContext ctx(dcp_case());
  testing::expect_passes(ctx, DcpFa(DcpMistake::none));
  testing::expect_passes(ctx, DcpFa(DcpMistake::merge_split_by_lse));  // the parts run alone, merged by LSE here
}

TEST(FaDcp, ARankReadingAnotherRanksSlotsIsCaught) {
  const std::string text =
      testing::describe(check_case(CaseContext(dcp_case()), DcpFa(DcpMistake::reads_other_rank)).findings, 64);
  EXPECT_NE(text.find("[stride-divide] dcp.rank.page_table -> dcp.rank.rank_slots"), std::string::npos) << text;
  EXPECT_NE(text.find("[oracle]"), std::string::npos) << text;
}

TEST(FaDcp, LocalLengthsWithoutTheRemainderAreCaught) {
  const std::string text = testing::describe(check_case(CaseContext(dcp_case()), DcpFa(DcpMistake::no_remainder)).findings, 64);
  EXPECT_NE(text.find("dcp.rank0.cache_seqlens"), std::string::npos) << text;
  EXPECT_NE(text.find("[oracle]"), std::string::npos) << text;
}

TEST(FaDcp, AMergeWithoutLseWeightsIsCaught) {
  const std::string text =
      testing::describe(check_case(CaseContext(dcp_case()), DcpFa(DcpMistake::merge_without_lse)).findings, 64);
  EXPECT_NE(text.find("[oracle]"), std::string::npos) << text;
}

TEST(FaDcp, FindingsSayTheyRanOverTheRanks) {
  const CaseContext ctx(dcp_case());
  const std::vector<Finding> found = check_case(ctx, DcpFa(DcpMistake::no_remainder)).findings;
  ASSERT_FALSE(found.empty());
  for (const Finding& f : found) {
    EXPECT_EQ(f.dcp_world, kRanks) << f.property << ": " << f.message;
    EXPECT_EQ(fingerprint_of(ctx.scenario(), f).to_json()["context"]["dcp"], kRanks);
  }
}

TEST(FaDcp, VariantFindingsSayTheyRanOverTheRanksToo) {
  // dcp_case's batch is ordered decode, extend, first chunk: clean; a batch order with the first
  // chunk before a row with context loses that row's context (metadata and a changed output).
  const CaseContext ctx(dcp_case());
  const DcpFa unordered(DcpMistake::unordered_context);
  const BackendRun base = run_backend(ctx, unordered);
  ASSERT_TRUE(check_run(ctx, unordered, base).findings.empty());
  const std::vector<Finding> found = check_metamorphic(ctx, base, unordered, {}, /*seed=*/0, nullptr);
  ASSERT_FALSE(found.empty());
  EXPECT_TRUE(std::any_of(found.begin(), found.end(), [](const Finding& f) { return f.variant == "batch-order"; }));
  for (const Finding& f : found) {
    EXPECT_EQ(f.dcp_world, kRanks) << f.property << ": " << f.message;
    EXPECT_EQ(fingerprint_of(ctx.scenario(), f).to_json()["context"]["dcp"], kRanks);
  }
  // kvfuzz's own fa plan runs on one GPU: its findings say 1
  EXPECT_EQ(base.plan->dcp_world(), kRanks);
  EXPECT_EQ(run_backend(ctx, fa_backend()).plan->dcp_world(), 1);
}

}  // namespace
}  // namespace kvfuzz
