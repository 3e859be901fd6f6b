// How a campaign draws its cases (fuzz/case_draw.h): within the backends' declared support, on
// reused shapes, and every draw replayable from its printed `kvfuzz gen` line.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "fuzz/case_draw.h"
#include "properties/tests/toy_backend.h"
#include "reference/scenario_json.h"

namespace kvfuzz {
namespace {

// Toy (decode and extend on full layers) declaring less still: what a real executor's narrower
// declaration looks like to the campaign.
class Narrower : public testing::Toy {
 public:
  explicit Narrower(std::function<bool(const Scenario&)> ok) : Toy(testing::ToyBug::none), ok_(std::move(ok)) {}
  Support supports(const Scenario& s) const override {
    if (!ok_(s)) return Support::no("outside the test's declaration");
    return Toy::supports(s);
  }

 private:
  std::function<bool(const Scenario&)> ok_;
};

Profile profile_of(int64_t i) { return i % 2 ? Profile::small : Profile::tiny; }

// What `kvfuzz gen` prints for the draw's line.
Scenario regenerate(const CaseDraw& d, Profile p) {
  if (!d.shape_seed) return generate(d.seed, p);
  return generate(d.seed, p, generate_shape(*d.shape_seed, p)).value();
}

TEST(CaseDraw, EveryCaseIsWithinTheDeclarationAndReplaysFromItsLine) {
  const Narrower bf16_ps1([](const Scenario& s) { return s.values.dtype == DType::bf16 && s.cache.page_size == 1; });
  ShapePool pool(3, 3, {&bf16_ps1});
  int64_t redrawn = 0, rejected = 0;
  for (int64_t i = 0; i < 200; ++i) {
    const CaseDraw d = draw_case(pool, i, profile_of(i), 0);
    ASSERT_TRUE(d.supported) << "case " << i;
    EXPECT_TRUE(bf16_ps1.supports(d.scenario).ok) << "case " << i;
    EXPECT_EQ(to_json(regenerate(d, profile_of(i))), to_json(d.scenario)) << gen_command(d, profile_of(i));
    // A first draw that was supported is the case as it always was; a later one is on a shape
    // drawn within the declaration.
    if (d.draws == 1) {
      EXPECT_EQ(d.seed, campaign_case_seed(3, i));
      EXPECT_FALSE(d.shape_seed.has_value());
    } else {
      EXPECT_TRUE(d.shape_seed.has_value());
    }
    redrawn += d.draws > 1;
    rejected += d.unsupported[0];
    EXPECT_EQ(d.unsupported[0], d.draws - 1);
  }
  // bf16 is one dtype of four, page size 1 one of several: most first draws were outside.
  EXPECT_GT(redrawn, 100);
  EXPECT_GT(rejected, 200);
}

TEST(CaseDraw, ADeclarationNothingMeetsKeepsTheFirstDrawUnsupported) {
  const Narrower none([](const Scenario&) { return false; });
  ShapePool pool(5, 5, {&none});
  const CaseDraw d = draw_case(pool, 7, Profile::tiny, 0);
  EXPECT_FALSE(d.supported);
  EXPECT_EQ(d.unsupported[0], d.draws);
  EXPECT_EQ(d.seed, campaign_case_seed(5, 7));
  EXPECT_EQ(to_json(d.scenario), to_json(generate(campaign_case_seed(5, 7), Profile::tiny)));
}

TEST(CaseDraw, OneSupportingBackendIsEnough) {
  const Narrower fp32([](const Scenario& s) { return s.values.dtype == DType::fp32; });
  const Narrower fp16([](const Scenario& s) { return s.values.dtype == DType::fp16; });
  ShapePool pool(9, 9, {&fp32, &fp16});
  std::set<DType> seen;
  for (int64_t i = 0; i < 100; ++i) {
    const CaseDraw d = draw_case(pool, i, Profile::tiny, 0);
    ASSERT_TRUE(d.supported);
    seen.insert(d.scenario.values.dtype);
    EXPECT_TRUE(fp32.supports(d.scenario).ok || fp16.supports(d.scenario).ok);
  }
  EXPECT_EQ(seen, (std::set<DType>{DType::fp32, DType::fp16}));
}

// A real kernel compiles a variant per shape: with reuse N, about one new shape per N cases, and
// each case keeps its shape's page size, model and dtype.
TEST(CaseDraw, ReusedShapesGrowOnePerNCases) {
  const testing::Toy toy(testing::ToyBug::none);
  ShapePool pool(11, 11, {&toy});
  std::set<std::pair<int, uint64_t>> shapes;
  for (int64_t i = 0; i < 240; ++i) {
    const Profile p = profile_of(i);
    const CaseDraw d = draw_case(pool, i, p, 24);
    ASSERT_TRUE(d.supported);
    ASSERT_TRUE(d.shape_seed.has_value());
    const CaseShape shape = generate_shape(*d.shape_seed, p);
    EXPECT_EQ(d.scenario.cache.page_size, shape.page_size);
    EXPECT_EQ(d.scenario.values.dtype, shape.dtype);
    EXPECT_EQ(d.scenario.model, shape.model);
    EXPECT_EQ(to_json(regenerate(d, p)), to_json(d.scenario)) << gen_command(d, p);
    EXPECT_NE(gen_command(d, p).find("--shape " + std::to_string(*d.shape_seed)), std::string::npos);
    shapes.insert({static_cast<int>(p), *d.shape_seed});
  }
  // 240 / 24 = 10 shapes introduced, per profile at most that many.
  EXPECT_LE(shapes.size(), 20u);
  EXPECT_GE(shapes.size(), 5u);
  // Without reuse, each case has its own.
  std::vector<Model> models;
  for (int64_t i = 0; i < 60; ++i) {
    const CaseDraw d = draw_case(pool, i, Profile::tiny, 0);
    if (std::find(models.begin(), models.end(), d.scenario.model) == models.end()) models.push_back(d.scenario.model);
  }
  EXPECT_GT(models.size(), 30u);
}

// --shape-run R: a profile's cases in one run of R consecutive cases share a shape (so an executor
// server can batch them), and runs pick among the shapes known as before.
TEST(CaseDraw, ARunOfCasesSharesOneShapePerProfile) {
  const testing::Toy toy(testing::ToyBug::none);
  ShapePool pool(11, 11, {&toy});
  constexpr int kReuse = 24, kRun = 8;
  std::map<std::pair<int64_t, int>, std::set<uint64_t>> per_run;  // (run, profile) -> shape seeds
  std::set<uint64_t> all;
  for (int64_t i = 0; i < 480; ++i) {
    const Profile p = profile_of(i);
    const CaseDraw d = draw_case(pool, i, p, kReuse, kRun);
    ASSERT_TRUE(d.supported && d.shape_seed.has_value());
    EXPECT_EQ(to_json(regenerate(d, p)), to_json(d.scenario)) << gen_command(d, p);
    per_run[{i / kRun, static_cast<int>(p)}].insert(*d.shape_seed);
    if (p == Profile::tiny) all.insert(*d.shape_seed);
  }
  for (const auto& [run, seeds] : per_run) EXPECT_EQ(seeds.size(), 1u) << "run " << run.first;
  // 480 / 24 = 20 shapes introduced; runs revisit the older ones.
  EXPECT_GE(all.size(), 10u);
  EXPECT_LE(all.size(), 20u);
  int revisits = 0;  // runs that took an older shape than the newest known
  for (int64_t run = 3; run < 60; ++run)
    revisits += draw_case(pool, run * kRun + 2, Profile::tiny, kReuse, kRun).shape_seed !=
                draw_case(pool, (run * kRun + kRun - 1) / kReuse * kReuse, Profile::tiny, kReuse, 1).shape_seed;
  EXPECT_GT(revisits, 10);
}

// A CI that keeps its compile caches keeps the shape seed and changes the campaign seed: new
// workloads on the same shapes.
TEST(CaseDraw, AKeptShapeSeedKeepsTheShapesUnderANewCampaignSeed) {
  const testing::Toy toy(testing::ToyBug::none);
  ShapePool first(1, 7, {&toy}), second(2, 7, {&toy}), other(2, 2, {&toy});
  int same_case = 0, same_shape_elsewhere = 0;
  for (int64_t i = 0; i < 64; i += 8) {  // each a new shape's first case
    const CaseDraw a = draw_case(first, i, Profile::tiny, 8), b = draw_case(second, i, Profile::tiny, 8);
    const CaseDraw c = draw_case(other, i, Profile::tiny, 8);
    EXPECT_EQ(a.shape_seed, b.shape_seed) << "case " << i;
    same_case += to_json(a.scenario) == to_json(b.scenario);
    same_shape_elsewhere += a.shape_seed == c.shape_seed;
  }
  EXPECT_LT(same_case, 2) << "a new campaign seed must draw new workloads";
  EXPECT_EQ(same_shape_elsewhere, 0) << "another shape seed must draw other shapes";
}

// An opaque executor (records_reads() false: an external one) cannot check shared prefixes, so
// its campaign draws again rather than sending a share case it must refuse; a recording one keeps them.
class Opaque : public testing::Toy {
 public:
  Opaque() : Toy(testing::ToyBug::none) {}
  bool records_reads() const override { return false; }
};

bool shares(const Scenario& s) {
  return std::any_of(s.history.begin(), s.history.end(), [](const Op& op) { return op.kind == OpKind::share; });
}

TEST(CaseDraw, AnOpaqueExecutorIsSentNoSharedPrefix) {
  const testing::Toy recording(testing::ToyBug::none);
  const Opaque opaque;
  ShapePool with_reads(13, 13, {&recording}), without(13, 13, {&opaque});
  int64_t shared = 0, redrawn = 0;
  for (int64_t i = 0; i < 200; ++i) {
    const CaseDraw a = draw_case(with_reads, i, Profile::small, 0), b = draw_case(without, i, Profile::small, 0);
    shared += a.supported && shares(a.scenario);
    ASSERT_TRUE(b.supported) << "case " << i;
    EXPECT_FALSE(shares(b.scenario)) << gen_command(b, Profile::small);
    EXPECT_TRUE(runnable(opaque, b.scenario).ok);
    EXPECT_EQ(to_json(regenerate(b, Profile::small)), to_json(b.scenario)) << gen_command(b, Profile::small);
    if (a.supported && shares(a.scenario)) {
      EXPECT_FALSE(runnable(opaque, a.scenario).ok);
      redrawn += b.draws > 1;
    }
  }
  EXPECT_GT(shared, 5) << "the generator's share ops must reach the recording executor's cases";
  EXPECT_EQ(redrawn, shared) << "each case a recording executor gets with a share op is drawn again for an opaque one";
}

}  // namespace
}  // namespace kvfuzz
