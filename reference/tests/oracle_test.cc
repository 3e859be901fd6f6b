// Tests of the exact oracle (reference/oracle.h): accuracy against a __float128 evaluation
// (oracle_quad.h) on every layer kind and batch mode, the empty-row convention, and bitwise
// invariance under thread count and batch composition.
//
// Error measures: normwise output error |o - o_quad| / max |V over the visible keys| and LSE error
// |lse - lse_quad| / max(1, |lse_quad|); both must stay within 1e-13.
#include "reference/oracle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <string>
#include <limits>
#include <utility>
#include <vector>

#include "reference/oracle_dispatch.h"
#include "reference/oracle_kernel.h"
#include "reference/oracle_materialise.h"
#include "reference/oracle_plan.h"
#include "reference/rng.h"
#include "reference/tests/oracle_quad.h"
#include "reference/tests/test_level.h"


namespace kvfuzz {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Model make_model(int32_t q_heads, int32_t kv_heads, int32_t head_dim, int32_t v_head_dim, std::vector<Layer> layers) {
  Model m;
  m.q_heads = q_heads;
  m.kv_heads = kv_heads;
  m.head_dim = head_dim;
  m.v_head_dim = v_head_dim;
  m.sm_scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  m.layers = std::move(layers);
  return m;
}

std::vector<Layer> all_layer_kinds(int32_t window, int32_t chunk) {
  return {Layer{LayerKind::full, 0, 0}, Layer{LayerKind::sliding_window, window, 0}, Layer{LayerKind::chunked, 0, chunk}};
}

// A scenario whose history commits `committed` (request, length) pairs, and the given batch.
Scenario make_scenario(Model m, const std::vector<std::pair<int32_t, int32_t>>& committed, Batch batch,
                       uint64_t seed = 7) {
  Scenario s;
  s.model = std::move(m);
  s.values.seed = seed;
  for (auto [request, len] : committed) {
    s.history.push_back(Op{OpKind::admit, request, 0, {}, {}});
    if (len > 0) s.history.push_back(Op{OpKind::extend, request, len, {}, {}});
  }
  s.batch = std::move(batch);
  return s;
}

Batch extend_batch(const std::vector<std::pair<int32_t, int32_t>>& request_and_len, Mode mode = Mode::extend) {
  Batch b;
  b.mode = mode;
  for (auto [request, len] : request_and_len) b.entries.push_back(BatchEntry{request, len, {}});
  return b;
}

#if defined(KVFUZZ_HAVE_QUAD)

constexpr double kTolerance = 1e-13;

struct Accuracy {
  double out = 0;  // worst normwise output error
  double lse = 0;  // worst LSE error
  int64_t checked = 0;
};

// Checks up to `per_row` evenly spaced queries of each row (always its last) on every head and layer.
Accuracy accuracy_vs_quad(const Scenario& s, int32_t per_row = INT32_MAX) {
  const LogicalBatch lb = derive_logical(s);
  const ValueSource values(s);
  const OracleResult r = run_oracle(s, lb, values);
  Accuracy a;
  for (int32_t layer = 0; layer < static_cast<int32_t>(s.model.layers.size()); ++layer)
    for (int32_t row = 0; row < static_cast<int32_t>(lb.rows.size()); ++row) {
      const auto queries = static_cast<int32_t>(lb.rows[static_cast<size_t>(row)].queries.size());
      const auto stride = static_cast<int32_t>(std::max<int64_t>(1, (int64_t{queries} + per_row - 1) / per_row));
      for (int32_t q = 0; q < queries; ++q) {
        if (q % stride != 0 && q != queries - 1) continue;
        const int64_t query = lb.q_indptr[static_cast<size_t>(row)] + q;
        for (int32_t h = 0; h < s.model.q_heads; ++h) {
          const QuadAttention e = quad_attention(s, lb, values, layer, row, q, h);
          const auto out = r.out_at(layer, query, h);
          const double lse = r.lse_at(layer, query, h);
          if (e.empty) {
            EXPECT_EQ(lse, -kInf);
            for (double o : out) EXPECT_EQ(o, 0.0);
            continue;
          }
          double err = 0;
          for (size_t d = 0; d < out.size(); ++d)
            err = std::max(err, static_cast<double>(fabsq(static_cast<__float128>(out[d]) - e.out[d])));
          if (e.max_abs_v > 0) err /= e.max_abs_v;
          const double lse_err = static_cast<double>(fabsq(static_cast<__float128>(lse) - e.lse) /
                                                     fmaxq(1, fabsq(e.lse)));
          a.out = std::max(a.out, err);
          a.lse = std::max(a.lse, lse_err);
          ++a.checked;
        }
      }
    }
  return a;
}

#define EXPECT_MATCHES_QUAD(scenario, per_row)                     \
  do {                                                             \
    const Accuracy acc = accuracy_vs_quad(scenario, per_row);      \
    EXPECT_GT(acc.checked, 0);                                     \
    EXPECT_LE(acc.out, kTolerance) << "normwise output error";     \
    EXPECT_LE(acc.lse, kTolerance) << "LSE error";                 \
  } while (0)

#define SKIP_WITHOUT_QUAD()
#else
#define SKIP_WITHOUT_QUAD() GTEST_SKIP() << "no __float128 on this compiler"
#define EXPECT_MATCHES_QUAD(scenario, per_row) (void)(scenario)
#endif

// ------------------------------------------------------------------------------ accuracy --

TEST(Oracle, MatchesQuadOnFullWindowAndChunkedLayersWithGqa) {
  SKIP_WITHOUT_QUAD();
  // Group of 4 q heads per kv head; 70-token extends make units big enough for the packed form,
  // the 1-token entries (decodes in a mixed batch) use the dot form.
  const Scenario s = make_scenario(make_model(8, 2, 64, 64, all_layer_kinds(31, 48)),
                                   {{3, 100}, {5, 37}, {9, 0}, {11, 260}},
                                   extend_batch({{3, 70}, {5, 1}, {9, 45}, {11, 1}}, Mode::mixed));
  EXPECT_MATCHES_QUAD(s, INT32_MAX);
}

TEST(Oracle, MatchesQuadWithHeadWidthsThatAreNotWholeVectors) {
  SKIP_WITHOUT_QUAD();
  const Scenario s = make_scenario(make_model(6, 2, 20, 12, all_layer_kinds(9, 16)), {{1, 29}, {2, 3}},
                                   extend_batch({{1, 40}, {2, 7}}));
  EXPECT_MATCHES_QUAD(s, INT32_MAX);
}

TEST(Oracle, MatchesQuadForMha) {
  SKIP_WITHOUT_QUAD();
  const Scenario s = make_scenario(make_model(3, 3, 32, 40, all_layer_kinds(17, 32)), {{1, 50}},
                                   extend_batch({{1, 33}}));
  EXPECT_MATCHES_QUAD(s, INT32_MAX);
}

TEST(Oracle, MatchesQuadForMla) {
  SKIP_WITHOUT_QUAD();
  Model m = make_model(16, 1, 72, 64, {Layer{LayerKind::full, 0, 0}, Layer{LayerKind::sliding_window, 20, 0}});
  m.mla = true;
  const Scenario s = make_scenario(m, {{4, 90}, {6, 12}}, extend_batch({{4, 1}, {6, 9}}, Mode::mixed));
  EXPECT_MATCHES_QUAD(s, INT32_MAX);
}

TEST(Oracle, MatchesQuadWithSoftcap) {
  SKIP_WITHOUT_QUAD();
  Model m = make_model(4, 2, 32, 32, all_layer_kinds(15, 16));
  m.sm_scale = 2.0;  // logits large enough that the cap bends them
  m.softcap = 5.0;
  const Scenario s = make_scenario(m, {{1, 40}}, extend_batch({{1, 24}}));
  EXPECT_MATCHES_QUAD(s, INT32_MAX);
}

TEST(Oracle, MatchesQuadOnSpecTree) {
  SKIP_WITHOUT_QUAD();
  Batch b;
  b.mode = Mode::target_verify;
  b.draft_tokens = 8;
  b.topk = 2;
  const std::vector<int32_t> tree = {-1, 0, 0, 1, 1, 2, 3, 6};
  b.entries = {BatchEntry{1, 0, tree}, BatchEntry{2, 0, tree}};
  // Window 5 and chunk 8 cut into both the prefix and the tree.
  const Scenario s = make_scenario(make_model(4, 1, 32, 32, all_layer_kinds(5, 8)), {{1, 45}, {2, 6}}, b);
  EXPECT_MATCHES_QUAD(s, INT32_MAX);
}

TEST(Oracle, MatchesQuadOnDraftDecodeBranches) {
  SKIP_WITHOUT_QUAD();
  Batch b;
  b.mode = Mode::draft_decode;
  b.topk = 3;
  b.draft_steps = 4;
  b.draft_step = 2;
  b.entries = {BatchEntry{1, 0, {}}, BatchEntry{7, 0, {}}};
  const Scenario s = make_scenario(make_model(4, 2, 16, 16, all_layer_kinds(3, 8)), {{1, 30}, {7, 9}}, b);
  EXPECT_MATCHES_QUAD(s, INT32_MAX);
}

TEST(Oracle, MatchesQuadOnLongRows) {
  SKIP_WITHOUT_QUAD();
  // Thousands of keys per query: many key blocks, many rescalings of the running sums.
  const Scenario s = make_scenario(make_model(4, 2, 64, 64, all_layer_kinds(700, 1024)), {{1, 3000}, {2, 2500}},
                                   extend_batch({{1, 1}, {2, 64}}, Mode::mixed));
  EXPECT_MATCHES_QUAD(s, 8);
}

TEST(Oracle, MatchesQuadInLowPrecisionDtypesAndSignatures) {
  SKIP_WITHOUT_QUAD();
  for (DType dtype : {DType::bf16, DType::fp8_e4m3, DType::fp16}) {
    Scenario s = make_scenario(make_model(4, 2, 24, 24, all_layer_kinds(11, 16)), {{1, 20}},
                               extend_batch({{1, 20}}));
    s.values.dtype = dtype;
    EXPECT_MATCHES_QUAD(s, INT32_MAX);
    s.values.fill = Fill::signature;  // Q = 0: the output is the mean of the visible V
    EXPECT_MATCHES_QUAD(s, INT32_MAX);
  }
}

TEST(Oracle, MatchesQuadWithAttentionSinks) {
  SKIP_WITHOUT_QUAD();
  // gpt-oss's shape: sinks per q head, from one that vanishes to one that dominates every key;
  // long rows (many key blocks before the sink joins) and one-key rows.
  Model m = make_model(4, 2, 16, 16, all_layer_kinds(5, 8));
  m.sinks = {0.0, -9.5, 2.25, 40.0};
  for (Mode mode : {Mode::extend, Mode::mixed}) {
    const Scenario s = make_scenario(m, {{1, 300}, {2, 0}}, extend_batch({{1, 1}, {2, 90}}, mode));
    EXPECT_MATCHES_QUAD(s, 10);
  }
}

// A small random case: any head shape, layer kinds, dtype, fill and batch mode. Built here from
// the Rng, not by the generator, so the oracle's tests depend on nothing but the reference types.
Scenario random_scenario(uint64_t seed) {
  Rng rng(seed);
  const bool mla = rng.chance(1, 5);
  const auto kv_heads = static_cast<int32_t>(mla ? 1 : rng.range(1, 2));
  const auto q_heads = static_cast<int32_t>(kv_heads * rng.range(1, 4));
  const auto v_head_dim = static_cast<int32_t>(rng.range(1, 40));
  const auto head_dim = static_cast<int32_t>(mla ? v_head_dim + 8 * rng.range(0, 1) : rng.range(1, 40));
  std::vector<Layer> layers;
  for (int64_t l = rng.range(1, 3); l > 0; --l) {
    switch (rng.below(3)) {
      case 0: layers.push_back(Layer{LayerKind::full, 0, 0}); break;
      case 1: layers.push_back(Layer{LayerKind::sliding_window, static_cast<int32_t>(rng.range(0, 40)), 0}); break;
      default: layers.push_back(Layer{LayerKind::chunked, 0, int32_t{4} << rng.below(4)}); break;
    }
  }
  Model m = make_model(q_heads, kv_heads, head_dim, v_head_dim, layers);
  m.mla = mla;
  m.sm_scale = std::vector<double>{m.sm_scale, 0.3, 1.5}[rng.below(3)];
  if (rng.chance(1, 4)) m.softcap = rng.chance(1, 2) ? 2.0 : 10.0;

  std::vector<std::pair<int32_t, int32_t>> committed;
  for (int32_t r = 1, n = static_cast<int32_t>(rng.range(1, 4)); r <= n; ++r)
    committed.emplace_back(r, static_cast<int32_t>(rng.range(0, 200)));
  Batch b;
  const Mode modes[] = {Mode::extend, Mode::mixed, Mode::decode, Mode::target_verify, Mode::draft_decode};
  b.mode = modes[rng.below(5)];
  b.topk = static_cast<int32_t>(rng.range(1, 4));
  b.draft_tokens = static_cast<int32_t>(rng.range(1, 12));
  b.draft_steps = static_cast<int32_t>(rng.range(1, 5));
  b.draft_step = static_cast<int32_t>(rng.below(static_cast<uint64_t>(b.draft_steps)));
  std::vector<int32_t> tree(static_cast<size_t>(b.draft_tokens), -1);
  for (size_t i = 1; i < tree.size(); ++i) tree[i] = static_cast<int32_t>(rng.below(i));
  for (auto [request, len] : committed) {
    BatchEntry e{request, 1, {}};
    if (b.mode == Mode::extend || (b.mode == Mode::mixed && rng.chance(1, 2)))
      e.extend_len = static_cast<int32_t>(rng.range(1, 80));
    if (b.mode == Mode::target_verify) e.parents = tree;
    b.entries.push_back(e);
  }
  Scenario s = make_scenario(m, committed, b, seed);
  const DType dtypes[] = {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3};
  s.values.dtype = dtypes[rng.below(4)];
  if (rng.chance(1, 6)) s.values.fill = Fill::signature;
  return s;
}

TEST(Oracle, MatchesQuadOnRandomSmallCases) {
  SKIP_WITHOUT_QUAD();
  for (int64_t seed = 0; seed < testing::test_cases(20); ++seed) {
    SCOPED_TRACE("random_scenario(" + std::to_string(seed) + ")");
    const Scenario s = random_scenario(static_cast<uint64_t>(seed));
    EXPECT_MATCHES_QUAD(s, 6);
  }
}

// ----------------------------------------------------------------------------- conventions --

TEST(Oracle, GivesZeroAndMinusInfinityToAQueryThatSeesNothing) {
  const Scenario s = make_scenario(make_model(2, 1, 8, 8, {Layer{LayerKind::full, 0, 0}}), {{1, 0}},
                                   extend_batch({{1, 2}}));
  // A hand-made row: query 0 sees nothing, query 1 sees column 0.
  LogicalBatch lb;
  lb.rows.push_back(LogicalRow{1, 0, 2, {0, 1}, {LogicalQuery{0, 0, {}}, LogicalQuery{1, 1, {{0, 1}}}}});
  lb.q_indptr = {0, 2};
  const ValueSource values(s);
  const OracleResult r = run_oracle(s, lb, values);
  std::vector<float> v(8);
  for (int32_t h = 0; h < 2; ++h) {
    EXPECT_EQ(r.lse_at(0, 0, h), -kInf);
    for (double o : r.out_at(0, 0, h)) EXPECT_EQ(o, 0.0);
    values.fill(0, Tensor::v, 1, 0, 0, v);  // one key: the output is its V exactly
    for (int d = 0; d < 8; ++d) EXPECT_EQ(r.out_at(0, 1, h)[static_cast<size_t>(d)], v[static_cast<size_t>(d)]);
    for (int d = 0; d < 8; ++d) EXPECT_EQ(r.abs_out_at(0, 1, h)[static_cast<size_t>(d)], std::abs(v[static_cast<size_t>(d)]));
    EXPECT_TRUE(std::isfinite(r.lse_at(0, 1, h)));
    EXPECT_EQ(r.qk_norm_at(0, 0, h), 0.0);
  }
  // The hull of the unit holding both queries is column 0 alone: qk_norm = ||q|| ||k of column 0||.
  std::vector<float> q(8), k(8);
  values.fill(0, Tensor::k, 1, 0, 0, k);
  for (int32_t h = 0; h < 2; ++h) {
    values.fill(0, Tensor::q, 1, 1, h, q);
    double qq = 0, kk = 0;
    for (int d = 0; d < 8; ++d) qq += double(q[size_t(d)]) * q[size_t(d)], kk += double(k[size_t(d)]) * k[size_t(d)];
    EXPECT_NEAR(r.qk_norm_at(0, 1, h), std::sqrt(qq * kk), 1e-14 * std::sqrt(qq * kk));
  }
}

// Hand-derived: with signature values Q = 0, so every logit is 0 and a query seeing n keys gets
// out = sum(v) / (n + e^sink), lse = log(n + e^sink); one that sees none gets 0 and lse = sink.
TEST(Oracle, AddsEachHeadsSinkToTheDenominatorOnlyOnEveryIsa) {
  Model m = make_model(2, 1, 8, 8, {Layer{LayerKind::full, 0, 0}});
  m.sinks = {0.0, std::log(3.0)};
  Scenario s = make_scenario(m, {{1, 0}}, extend_batch({{1, 3}}));
  s.values.fill = Fill::signature;
  // Row of 3 queries: query 0 sees nothing (hand-made), query 1 columns 0..1, query 2 columns 0..2.
  LogicalBatch lb;
  lb.rows.push_back(LogicalRow{
      1, 0, 3, {0, 1, 2}, {LogicalQuery{0, 0, {}}, LogicalQuery{1, 1, {{0, 2}}}, LogicalQuery{2, 2, {{0, 3}}}}});
  lb.q_indptr = {0, 3};
  const ValueSource values(s);
  std::vector<std::vector<float>> v(3, std::vector<float>(8));
  for (int32_t c = 0; c < 3; ++c) values.fill(0, Tensor::v, 1, c, 0, v[static_cast<size_t>(c)]);
  for (Isa isa : runnable_isas()) {
    SCOPED_TRACE(std::string(isa_name(isa)));
    use_oracle_isa(isa);
    const OracleResult r = run_oracle(s, lb, values);
    for (int32_t h = 0; h < 2; ++h) {
      const double e_sink = h == 0 ? 1.0 : 3.0;
      EXPECT_EQ(r.lse_at(0, 0, h), m.sinks[static_cast<size_t>(h)]);
      for (double o : r.out_at(0, 0, h)) EXPECT_EQ(o, 0.0);
      for (int32_t q = 1; q < 3; ++q) {
        const double n = q + 1;
        EXPECT_NEAR(r.lse_at(0, q, h), std::log(n + e_sink), 1e-15);
        for (size_t d = 0; d < 8; ++d) {
          double sum = 0;
          for (int32_t c = 0; c <= q; ++c) sum += v[static_cast<size_t>(c)][d];
          EXPECT_NEAR(r.out_at(0, q, h)[d], sum / (n + e_sink), 1e-14 * (1 + std::abs(sum)));
        }
      }
    }
  }
  use_oracle_isa(runnable_isas().back());
}

TEST(Oracle, ReturnsAnEmptyResultForAnIdleBatch) {
  Batch b;
  b.mode = Mode::idle;
  const Scenario s = make_scenario(make_model(2, 1, 8, 8, all_layer_kinds(3, 4)), {{1, 5}}, b);
  const OracleResult r = run_oracle(s, derive_logical(s), ValueSource(s));
  EXPECT_EQ(r.layers, 3);
  EXPECT_EQ(r.num_queries, 0);
  EXPECT_TRUE(r.out.empty());
  EXPECT_TRUE(r.lse.empty());
}

// A batch that exercises both kernel forms, trees aside.
Scenario mixed_scenario() {
  return make_scenario(make_model(8, 2, 40, 24, all_layer_kinds(50, 64)), {{1, 300}, {2, 0}, {3, 77}, {4, 1000}},
                       extend_batch({{1, 90}, {2, 130}, {3, 1}, {4, 3}}, Mode::mixed), 99);
}

bool bitwise_equal(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

bool bitwise_equal(const OracleResult& a, const OracleResult& b) {
  return bitwise_equal(a.out, b.out) && bitwise_equal(a.lse, b.lse) && bitwise_equal(a.abs_out, b.abs_out) &&
         bitwise_equal(a.qk_norm, b.qk_norm);
}

TEST(Oracle, IsThreadCountInvariant) {
  Batch tree;
  tree.mode = Mode::target_verify;
  tree.draft_tokens = 6;
  tree.topk = 3;
  tree.entries = {BatchEntry{1, 0, {-1, 0, 0, 0, 1, 2}}, BatchEntry{2, 0, {-1, 0, 1, 2, 3, 4}}};
  const Scenario tree_case = make_scenario(make_model(16, 2, 64, 64, all_layer_kinds(40, 32)), {{1, 500}, {2, 90}}, tree);
  for (const Scenario& s : {mixed_scenario(), tree_case}) {
    const LogicalBatch lb = derive_logical(s);
    const ValueSource values(s);
    const OracleResult one = run_oracle(s, lb, values, 1);
    for (int threads : {2, 3}) EXPECT_TRUE(bitwise_equal(one, run_oracle(s, lb, values, threads))) << threads;
  }
}

// run_oracle with every row's K/V stored, as the bench's kernel phase runs it.
OracleResult oracle_storing_all_kv(const Scenario& s, const LogicalBatch& lb, const ValueSource& values) {
  OracleResult r = run_oracle(s, lb, values);
  std::fill(r.out.begin(), r.out.end(), -1.0);
  std::fill(r.abs_out.begin(), r.abs_out.end(), -1.0);
  const OracleShape shape = oracle_shape(s.model);
  const size_t per_layer = static_cast<size_t>(r.num_queries) * static_cast<size_t>(r.q_heads);
  Materialised m;
  for (int32_t layer = 0; layer < r.layers; ++layer) {
    const std::vector<RowPlan> rows = plan_rows(s.model.layers[static_cast<size_t>(layer)], lb);
    const std::vector<WorkUnit> units = plan_units(rows, shape);
    materialise(values, layer, lb, rows, units, shape, 0, KvStorage::store_all, m);
    const size_t out_at = layer * per_layer * static_cast<size_t>(r.v_head_dim), lse_at = layer * per_layer;
    attend(units, rows, lb, m, {r.out.data() + out_at, r.lse.data() + lse_at, r.abs_out.data() + out_at,
                                r.qk_norm.data() + lse_at}, 0);
  }
  return r;
}

TEST(Oracle, StreamedKvGivesTheStoredResultBitForBit) {
  const Scenario s = mixed_scenario();  // rows 3 and 4 (decodes) are streamed, rows 1 and 2 stored
  const LogicalBatch lb = derive_logical(s);
  const ValueSource values(s);
  const OracleShape shape = oracle_shape(s.model);
  const std::vector<RowPlan> rows = plan_rows(s.model.layers[0], lb);
  const std::vector<WorkUnit> units = plan_units(rows, shape);
  Materialised m;
  materialise(values, 0, lb, rows, units, shape, 0, KvStorage::stream_read_once, m);
  EXPECT_EQ(m.streamed, (std::vector<uint8_t>{0, 0, 1, 1}));
  EXPECT_TRUE(bitwise_equal(run_oracle(s, lb, values), oracle_storing_all_kv(s, lb, values)));
}

TEST(Oracle, ResultOfARowIsIndependentOfTheOtherRows) {
  const Scenario all = mixed_scenario();
  const OracleResult together = run_oracle(all, derive_logical(all), ValueSource(all));
  const LogicalBatch lb_all = derive_logical(all);
  for (size_t e = 0; e < all.batch.entries.size(); ++e) {
    Scenario alone = all;
    alone.batch.entries = {all.batch.entries[e]};
    const LogicalBatch lb = derive_logical(alone);
    const OracleResult r = run_oracle(alone, lb, ValueSource(alone));
    for (int32_t layer = 0; layer < r.layers; ++layer)
      for (int64_t q = 0; q < r.num_queries; ++q)
        for (int32_t h = 0; h < r.q_heads; ++h) {
          const int64_t q_all = lb_all.q_indptr[e] + q;
          const auto a = r.out_at(layer, q, h), b = together.out_at(layer, q_all, h);
          EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size_bytes()), 0);
          EXPECT_EQ(r.lse_at(layer, q, h), together.lse_at(layer, q_all, h));
        }
  }
}

// -------------------------------------------------------------------------------- softmax e^x --

// Every ISA's e^x (oracle_dispatch.h), within one ulp of expq, and the same bits on every ISA.
TEST(OracleExp, IsWithinOneUlpAndExactAtZeroOnEveryIsa) {
  SKIP_WITHOUT_QUAD();
#if defined(KVFUZZ_HAVE_QUAD)
  const Isa in_use = oracle_kernels().isa;
  std::vector<double> first;
  for (Isa isa : runnable_isas()) {
    SCOPED_TRACE(std::string(isa_name(isa)));
    use_oracle_isa(isa);
    double (*const exp_nonpositive)(double) = oracle_kernels().exp_nonpositive;
    EXPECT_EQ(exp_nonpositive(0.0), 1.0);
    EXPECT_EQ(exp_nonpositive(-0.0), 1.0);
    EXPECT_EQ(exp_nonpositive(-kInf), 0.0);
    EXPECT_EQ(exp_nonpositive(-800.0), 0.0);
    double worst = 0;
    uint64_t state = 12345;
    std::vector<double> got_all;
    for (int i = 0; i < 200000; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      const double u = static_cast<double>(state >> 11) * 0x1p-53;  // [0, 1)
      // Half the samples near 0 (softmax weights), half over the whole range down to subnormals.
      const double x = i % 2 == 0 ? -u * 40.0 : -u * 745.0;
      const double got = exp_nonpositive(x);
      got_all.push_back(got);
      const __float128 want = expq(static_cast<__float128>(x));
      const double ulp = std::max(std::nextafter(static_cast<double>(want), kInf) - static_cast<double>(want),
                                  std::numeric_limits<double>::denorm_min());
      worst = std::max(worst, static_cast<double>(fabsq(static_cast<__float128>(got) - want)) / ulp);
    }
    EXPECT_LE(worst, 1.0) << "worst error in ulps";
    if (first.empty()) first = got_all;
    else EXPECT_TRUE(bitwise_equal(first, got_all)) << "differs from " << isa_name(runnable_isas()[0]);
  }
  use_oracle_isa(in_use);
#endif
}

}  // namespace
}  // namespace kvfuzz
