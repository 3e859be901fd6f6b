// The property harness itself, on a toy backend whose bugs we control: a correct toy passes, and
// each planted bug is reported by the property that owns it, naming what a person needs.
#include <gtest/gtest.h>

#include "backends/attend.h"
#include "backends/common/paged_view.h"
#include "backends/kv_store.h"
#include "properties/check.h"
#include "properties/tolerance.h"
#include "reference/generate.h"
#include "reference/tests/test_level.h"

namespace kvfuzz {
namespace {

enum class ToyBug { none, short_extent, foreign_row, wrong_table_entry, nan_value };

// Decode/extend on full layers: a token table straight from req_to_token, causal.
struct ToyPlan : Plan {
  Buffer<int32_t> table;  // [bs][max_context_len]
  int32_t width = 0;
  void check_metadata(MetadataChecker& check) const override {
    for (int32_t i = 0; i < check.batch().bs; ++i) {
      for (int32_t c = 0; c < check.batch().seq_lens[static_cast<size_t>(i)]; ++c)
        for (int32_t l = 0; l < 1; ++l) check.token_entry(table, int64_t{i} * width + c, l, i, c);
    }
  }
  void check_guards() const override { table.check_guards(); }
};

class Toy : public Backend {
 public:
  explicit Toy(ToyBug bug) : bug_(bug) {}
  std::string_view name() const override { return "toy"; }
  std::string_view summary() const override { return "test-only"; }
  Support supports(const Scenario& s) const override {
    if (s.batch.mode != Mode::decode && s.batch.mode != Mode::extend) return Support::no("decode and extend only");
    for (const Layer& l : s.model.layers)
      if (l.kind != LayerKind::full) return Support::no("full layers only");
    return {};
  }
  std::unique_ptr<Plan> plan(const PlanInput& in) const override {
    auto p = std::make_unique<ToyPlan>();
    p->width = in.cache.config.max_context_len;
    p->table = Buffer<int32_t>("toy_table", int64_t{in.batch.padded_bs} * p->width);
    for (int32_t i = 0; i < in.batch.padded_bs; ++i) {
      int32_t row = in.batch.req_pool_indices[static_cast<size_t>(i)];
      if (bug_ == ToyBug::foreign_row && i == 0 && in.batch.bs > 1) row = in.batch.req_pool_indices[1];
      for (int32_t c = 0; c < in.batch.seq_lens[static_cast<size_t>(i)]; ++c) p->table.set(int64_t{i} * p->width + c, in.cache.r2t(row, c));
    }
    if (bug_ == ToyBug::wrong_table_entry) p->table.set(0, p->table[0] + 1);
    return p;
  }
  void run(const Plan& base, const RunInput& in, RunOutput& out) const override {
    const auto& p = static_cast<const ToyPlan&>(base);
    const ForwardBatch& fb = in.batch;
    for (int32_t layer = 0; layer < out.layers; ++layer) {
      store_new_kv(layer, step_cache_locs(fb), in);
      LayerContext ctx(in, layer, out);
      Partial part = ctx.make_partial();
      int64_t token = 0;
      for (int32_t i = 0; i < fb.padded_bs; ++i) {
        const int32_t q_len = fb.extend_lens[static_cast<size_t>(i)];
        int64_t k_len = fb.seq_lens[static_cast<size_t>(i)];
        if (bug_ == ToyBug::short_extent && i == 0) k_len -= 1;
        std::vector<int64_t> q_tokens;
        for (int32_t j = 0; j < q_len; ++j) q_tokens.push_back(token + j);
        attend_row(
            ctx, i, q_tokens, k_len,
            [&](int64_t k) { return Read{ctx.pool_source(), p.table[int64_t{i} * p.width + k]}; },
            [&](int64_t qi, int64_t k) { return k <= causal_last_key(fb.seq_lens[static_cast<size_t>(i)], q_len, qi); }, part);
        token += q_len;
      }
      if (bug_ == ToyBug::nan_value) part.out(0, 0)[0] += 1.0f;
      ctx.write_output(part);
    }
  }

 private:
  ToyBug bug_;
};

// A small decode case on full layers with two requests.
Scenario toy_case() {
  Scenario s;
  s.model = {2, 1, 4, 4, false, 0.5, 0.0, {{LayerKind::full, 0, 0}}};
  s.cache = {4, 16, 0, 4, 32, false};
  s.history = {{OpKind::admit, 0, 0, {}, {}}, {OpKind::extend, 0, 9, {}, {}},
               {OpKind::admit, 1, 0, {}, {}}, {OpKind::extend, 1, 5, {}, {}}};
  s.batch.mode = Mode::decode;
  s.batch.entries = {{0, 0, {}}, {1, 0, {}}};
  s.values.seed = 9;
  return s;
}

TEST(Check, ACorrectBackendPasses) {
  const CaseContext ctx(toy_case());
  const CheckResult r = check_case(ctx, Toy(ToyBug::none));
  ASSERT_TRUE(r.support.ok);
  for (const Finding& f : r.findings) ADD_FAILURE() << f.property << ": " << f.message;
}

TEST(Check, ACorrectBackendPassesGeneratedCases) {
  int ran = 0;
  for (uint64_t seed = 0; seed < static_cast<uint64_t>(testing::test_cases(300)); ++seed) {
    const CaseContext ctx(generate(seed, Profile::small));
    const CheckResult r = check_case(ctx, Toy(ToyBug::none));
    ran += r.support.ok;
    for (const Finding& f : r.findings) ADD_FAILURE() << "seed " << seed << ": " << f.property << ": " << f.message;
  }
  EXPECT_GT(ran, 10);
}

TEST(Check, UnsupportedIsNotAPass) {
  Scenario s = toy_case();
  s.model.layers[0] = {LayerKind::sliding_window, 3, 0};
  const CheckResult r = check_case(CaseContext(s), Toy(ToyBug::none));
  EXPECT_FALSE(r.support.ok);
  EXPECT_EQ(r.support.why, "full layers only");
}

const Finding* first(const CheckResult& r, const std::string& property) {
  for (const Finding& f : r.findings)
    if (f.property == property) return &f;
  return nullptr;
}

TEST(Check, AMissingKeyIsACacheExtentFinding) {
  const CheckResult r = check_case(CaseContext(toy_case()), Toy(ToyBug::short_extent));
  const Finding* f = first(r, "cache-extent");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("row 0 (request 0), query position 9"), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("missing       9"), std::string::npos) << f->message;
}

TEST(Check, AnotherRequestsSlotIsAnInBoundsFinding) {
  const CheckResult r = check_case(CaseContext(toy_case()), Toy(ToyBug::foreign_row));
  const Finding* f = first(r, "in-bounds");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("(request 1, column 0)"), std::string::npos) << f->message;
}

TEST(Check, AWrongTableEntryIsPinpointed) {
  const CheckResult r = check_case(CaseContext(toy_case()), Toy(ToyBug::wrong_table_entry));
  const Finding* f = first(r, "stride-divide");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("toy_table[0] maps layer 0, row 0 (request 0), key column 0 to slot 5; req_to_token says slot 4"),
            std::string::npos)
      << f->message;
}

TEST(Check, AWrongValueIsAnOracleFinding) {
  const CheckResult r = check_case(CaseContext(toy_case()), Toy(ToyBug::nan_value));
  const Finding* f = first(r, "oracle");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("out[0]"), std::string::npos) << f->message;
}

TEST(Tolerance, IsTightEnoughToCatchOneWrongKeyAmongFew) {
  Scenario s = toy_case();
  s.values.dtype = DType::bf16;
  const Tolerance t = tolerance(s, 16, 3.0);
  // A key of weight 1/16 whose value differs by 1 moves the output by 1/16.
  EXPECT_LT(t.out, 1.0 / 16);
  s.values.dtype = DType::fp32;
  EXPECT_LT(tolerance(s, 1000, 3.0).out, 1.0 / 1000);
}

}  // namespace
}  // namespace kvfuzz
