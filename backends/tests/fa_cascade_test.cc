// Cascade attention over a common prefix in the page_table family (FaGroup::common_prefix_len, the
// shape vLLM's FlashAttention backend runs): a test-only backend turns kvfuzz's fa plan into a
// cascade — one non-causal row of every query over the shared prefix pages, then one causal row per
// request over the rest, merged by LSE — and every property holds on requests that share their
// prefix pages (`share` ops). Planted mistakes are caught: a prefix over the wrong pages, a prefix past a request's
// cached tokens, a suffix that starts at the wrong key.
#include <gtest/gtest.h>

#include "backends/fa/fa_backend.h"
#include "backends/fa/fa_plan.h"
#include "backends/fa/fa_tables.h"
#include "backends/tests/backend_test_util.h"
#include "properties/check.h"
#include "reference/shared_prefix.h"

namespace kvfuzz {
namespace {

using fa::FaCall;
using fa::FaPlan;
using testing::admit;
using testing::extend;

enum class Mistake { none, prefix_pages_shifted, prefix_too_long, suffix_off_by_a_page };

// The fa backend, its full group run as a cascade over `prefix` keys (whole pages).
class CascadeFa : public Backend {
 public:
  CascadeFa(int32_t prefix, Mistake mistake) : prefix_(prefix), mistake_(mistake) {}
  std::string_view name() const override { return "fa_cascade"; }
  std::string_view summary() const override { return "fa as a cascade over the common prefix (test only)"; }
  std::string_view family() const override { return "page_table"; }
  Support supports(const Scenario& s) const override { return fa_backend().supports(s); }
  void run(const Plan& plan, const RunInput& in, RunOutput& out) const override { fa_backend().run(plan, in, out); }

  std::unique_ptr<Plan> plan(const PlanInput& in) const override {
    auto plan = fa_backend().plan(in);
    fa::FaGroup& g = static_cast<FaPlan&>(*plan).full;
    const FaCall whole = g.parts.at(0);
    const int32_t ps = whole.view_page_size, pages = prefix_ / ps;
    const int32_t shift = mistake_ == Mistake::prefix_pages_shifted ? 1 : 0;
    const int32_t tokens = whole.cu_seqlens_q[whole.rows];
    const int32_t len = mistake_ == Mistake::prefix_too_long ? prefix_ + ps : prefix_;
    FaCall pre = fa::make_call("cascade.prefix", "cascade.prefix.page_table", 1, whole.width, ps, false);
    for (int32_t lp = 0; lp + shift < whole.width; ++lp) pre.page_table.set(lp, whole.page_table[lp + shift]);
    fa::set_row(pre, 0, 0, tokens, len);
    fa::finish_call(pre, 1);
    const int32_t skip = mistake_ == Mistake::suffix_off_by_a_page ? pages + 1 : pages;
    const int32_t width = whole.width - pages;
    FaCall suf = fa::make_call("cascade.suffix", "cascade.suffix.page_table", whole.rows, width, ps, true);
    for (int32_t b = 0; b < whole.rows; ++b) {
      for (int32_t lp = 0; lp < width && skip + lp < whole.width; ++lp)
        suf.page_table.set(int64_t{b} * width + lp, whole.page_table[int64_t{b} * whole.width + skip + lp]);
      fa::set_row(suf, b, whole.cu_seqlens_q[b], whole.q_len(b), whole.cache_seqlens[b] - len);
    }
    fa::finish_call(suf, whole.rows);
    g.parts = {pre, suf};
    g.common_prefix_len = len;
    return plan;
  }

 private:
  int32_t prefix_;
  Mistake mistake_;
};

// Three requests on request 0's first two pages (page size 4), then pages of their own; a mixed
// batch whose queries all lie past the 8 shared keys.
Scenario shared_case() {
  Scenario s;
  s.model = {4, 2, 8, 8, false, 0.35, 0.0, {{LayerKind::full, 0, 0}, {LayerKind::full, 0, 0}}, {}};
  s.cache = {4, 24, 0, 4, 32, false};
  s.history = {admit(3),          extend(3, 5), admit(0), extend(0, 10),     testing::release(3), admit(1),
               share_op(1, 0, 8), extend(1, 3), admit(2), share_op(2, 0, 8), extend(2, 9)};
  s.batch.mode = Mode::mixed;
  s.batch.entries = {{2, 3, {}}, {0, 1, {}}, {1, 2, {}}};
  s.values.seed = 5;
  return s;
}

std::string all(const std::vector<Finding>& findings) { return testing::describe(findings, 64); }

TEST(FaCascade, PassesEveryPropertyOverASharedPrefix) {
  const CaseContext ctx(shared_case());
  testing::expect_passes(ctx, CascadeFa(8, Mistake::none));
  testing::expect_passes(ctx, CascadeFa(4, Mistake::none));  // a shorter cascade is just as right
  testing::expect_passes(ctx, fa_backend());                 // and so is no cascade
}

TEST(FaCascade, APrefixOverTheWrongPagesIsCaught) {
  const CheckResult r = check_case(CaseContext(shared_case()), CascadeFa(8, Mistake::prefix_pages_shifted));
  const std::string text = all(r.findings);
  EXPECT_NE(text.find("[stride-divide] cascade.prefix.page_table"), std::string::npos) << text;
  EXPECT_NE(text.find("[oracle]"), std::string::npos) << text;
}

TEST(FaCascade, APrefixPastACachedPrefixIsCaught) {
  const CheckResult r = check_case(CaseContext(shared_case()), CascadeFa(8, Mistake::prefix_too_long));
  const std::string text = all(r.findings);
  EXPECT_NE(text.find("common_prefix_len 12 reaches past batch row"), std::string::npos) << text;
  EXPECT_NE(text.find("[oracle]"), std::string::npos) << text;
}

TEST(FaCascade, ASuffixStartingAtTheWrongKeyIsCaught) {
  const CheckResult r = check_case(CaseContext(shared_case()), CascadeFa(8, Mistake::suffix_off_by_a_page));
  const std::string text = all(r.findings);
  EXPECT_NE(text.find("[stride-divide] cascade.suffix.page_table"), std::string::npos) << text;
}

// Without a share the rows hold different pages: a cascade over them is wrong and caught.
TEST(FaCascade, ACascadeOverUnsharedPagesIsCaught) {
  Scenario s = shared_case();
  s.history = {admit(0), extend(0, 10), admit(1), extend(1, 11), admit(2), extend(2, 17)};
  const CheckResult r = check_case(CaseContext(s), CascadeFa(8, Mistake::none));
  const std::string text = all(r.findings);
  EXPECT_NE(text.find("[stride-divide] cascade.prefix.page_table"), std::string::npos) << text;
}

}  // namespace
}  // namespace kvfuzz
