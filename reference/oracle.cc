// The exact oracle (oracle.h): per layer and row chunk, plan, materialise, attend.
#include "reference/oracle.h"

#include <atomic>
#include <chrono>
#include <limits>

#include "reference/oracle_kernel.h"
#include "reference/oracle_materialise.h"
#include "reference/oracle_phases.h"
#include "reference/oracle_plan.h"

namespace kvfuzz {
namespace {

class Stopwatch {
 public:
  // Adds the seconds since the last call (or construction) to *into.
  void lap(double* into) {
    const auto now = std::chrono::steady_clock::now();
    *into += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

std::atomic<int64_t> g_oracle_nanoseconds{0};  // oracle_seconds_spent's sum

}  // namespace

OracleResult run_oracle_timed(const Scenario& s, const LogicalBatch& lb, const ValueSource& values, int threads,
                              OracleTimes* times) {
  const auto start = std::chrono::steady_clock::now();
  OracleTimes t;
  Stopwatch clock;
  const OracleShape shape = oracle_shape(s.model);
  OracleResult r;
  r.layers = static_cast<int32_t>(s.model.layers.size());
  r.num_queries = lb.q_indptr.empty() ? 0 : lb.q_indptr.back();
  r.q_heads = s.model.q_heads;
  r.v_head_dim = s.model.v_head_dim;
  const size_t per_layer = static_cast<size_t>(r.num_queries) * static_cast<size_t>(r.q_heads);
  r.out.assign(static_cast<size_t>(r.layers) * per_layer * static_cast<size_t>(r.v_head_dim), 0.0);
  r.lse.assign(static_cast<size_t>(r.layers) * per_layer, -std::numeric_limits<double>::infinity());
  r.abs_out.assign(r.out.size(), 0.0);
  r.qk_norm.assign(r.lse.size(), 0.0);

  Materialised m;  // reused by every chunk of every layer
  for (int32_t layer = 0; layer < r.layers; ++layer) {
    const std::vector<RowPlan> rows = plan_rows(s.model.layers[static_cast<size_t>(layer)], lb);
    for (auto [begin, end] : chunk_rows(rows, shape, kMaterialiseBudgetFloats)) {
      const std::span<const RowPlan> chunk(rows.data() + begin, end - begin);
      const std::vector<WorkUnit> units = plan_units(chunk, shape);
      clock.lap(&t.setup_s);
      materialise(values, layer, lb, chunk, units, shape, threads, KvStorage::stream_read_once, m);
      clock.lap(&t.materialise_s);
      const size_t out_at = layer * per_layer * static_cast<size_t>(r.v_head_dim), lse_at = layer * per_layer;
      attend(units, chunk, lb, m, {r.out.data() + out_at, r.lse.data() + lse_at, r.abs_out.data() + out_at,
                                   r.qk_norm.data() + lse_at}, threads);
      clock.lap(&t.kernel_s);
    }
  }
  if (times != nullptr) *times = t;
  g_oracle_nanoseconds +=
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  return r;
}

double oracle_seconds_spent() { return static_cast<double>(g_oracle_nanoseconds.load()) * 1e-9; }

OracleResult run_oracle(const Scenario& s, const LogicalBatch& lb, const ValueSource& values, int threads) {
  return run_oracle_timed(s, lb, values, threads, nullptr);
}

}  // namespace kvfuzz
