// A test-only backend whose bugs the tests control: decode and extend on full layers, reading a
// token table copied from req_to_token. The harness tests and the metamorphic tests use it to show
// that each property reports exactly the bug it owns.
#pragma once

#include "backends/attend.h"
#include "backends/common/paged_view.h"
#include "backends/kv_store.h"

#include <cmath>
#include <stdexcept>
#include <vector>

namespace kvfuzz::testing {

enum class ToyBug {
  none,
  short_extent,
  foreign_row,
  wrong_table_entry,
  nan_value,
  first_row_shift,
  throws_in_plan,       // the planner throws std::runtime_error: a crash
  vector_at_in_run,     // the executor's own std::vector::at throws std::out_of_range: a crash
  reads_past_row,       // the planner reads req_to_token past its row: in-bounds
  check_asks_past_row,  // the metadata check (harness side) asks for a missing entry: harness error
  no_graphs,            // does not support CUDA-graph batches (the replay variant is dropped)
};

// Decode/extend on full layers: a token table straight from req_to_token, causal.
struct ToyPlan : Plan {
  Buffer<int32_t> table;  // [bs][max_context_len]
  int32_t width = 0;
  bool check_asks_past_row = false;
  void check_metadata(MetadataChecker& check) const override {
    if (check_asks_past_row) check.expected_slot(0, check.scenario().cache.max_context_len, PoolKind::full);
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
  std::string_view family() const override { return "toy"; }
  std::string_view summary() const override { return "test-only"; }
  Support supports(const Scenario& s) const override {
    if (s.batch.mode != Mode::decode && s.batch.mode != Mode::extend) return Support::no("decode and extend only");
    if (bug_ == ToyBug::no_graphs && s.batch.graph_bs > 0) return Support::no("no CUDA graphs");
    for (const Layer& l : s.model.layers)
      if (l.kind != LayerKind::full) return Support::no("full layers only");
    return {};
  }
  std::unique_ptr<Plan> plan(const PlanInput& in) const override {
    if (bug_ == ToyBug::throws_in_plan) throw std::runtime_error("toy planner gave up");
    auto p = std::make_unique<ToyPlan>();
    p->check_asks_past_row = bug_ == ToyBug::check_asks_past_row;
    if (bug_ == ToyBug::reads_past_row) in.cache.r2t(in.batch.req_pool_indices[0], in.cache.config.max_context_len);
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
    if (bug_ == ToyBug::vector_at_in_run) (void)std::vector<int>(2).at(5);
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
      if (bug_ == ToyBug::first_row_shift && fb.bs > 0) part.out(0, 0)[0] = std::nextafter(part.out(0, 0)[0], 1e9f);
      ctx.write_output(part);
    }
  }

 private:
  ToyBug bug_;
};

inline // A small decode case on full layers with two requests.
Scenario toy_case() {
  Scenario s;
  s.model = {2, 1, 4, 4, false, 0.5, 0.0, {{LayerKind::full, 0, 0}}, {}};
  s.cache = {4, 16, 0, 4, 32, false};
  s.history = {{OpKind::admit, 0, 0, {}, {}}, {OpKind::extend, 0, 9, {}, {}},
               {OpKind::admit, 1, 0, {}, {}}, {OpKind::extend, 1, 5, {}, {}}};
  s.batch.mode = Mode::decode;
  s.batch.entries = {{0, 0, {}}, {1, 0, {}}};
  s.values.seed = 9;
  return s;
}

}  // namespace kvfuzz::testing
