// The oracle's plan for one layer: what each query sees, which columns to materialise, and how
// the work splits into independent units.
//
// Where it sits: first step of run_oracle (oracle.cc), after derive_logical (logical.h). Each row
// gets its queries' visible column ranges (logical.h `visible`) and their hull, the columns the
// materialise step (oracle_materialise.h) reads from the value source. Rows are then grouped into
// chunks that bound memory, and each chunk's work into units of (row, kv head, query block) that
// the kernel (oracle_kernel.h) runs in any order on any thread: a unit's result depends on the
// unit alone, so the oracle is bitwise the same for every thread count.
//
//   std::vector<RowPlan> rows = plan_rows(layer, lb);
//   for (auto [b, e] : chunk_rows(rows, shape, kMaterialiseBudgetFloats))
//     std::vector<WorkUnit> units = plan_units({rows.data() + b, e - b}, shape);
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "reference/logical.h"
#include "reference/scenario.h"

namespace kvfuzz {

// The model's attention shape, with head widths padded to whole sums of kOracleLanes lanes
// (oracle_dispatch.h), the same on every ISA.
struct OracleShape {
  int32_t q_heads = 1;
  int32_t kv_heads = 1;
  int32_t group = 1;  // q heads per kv head: q head h reads kv head h / group
  int32_t head_dim = 1;
  int32_t v_head_dim = 1;
  int32_t dp = 0;   // head_dim rounded up to a multiple of kOracleLanes; padding holds zeros
  int32_t dvp = 0;  // v_head_dim likewise
  double sm_scale = 1.0;
  double softcap = 0.0;
  const double* sinks = nullptr;  // [q_heads]: the model's sink logits (Model::sinks), null without
};

OracleShape oracle_shape(const Model& m);

struct RowPlan {
  int32_t row = 0;     // index into LogicalBatch::rows
  int32_t col_lo = 0;  // hull of every query's visible columns: [col_lo, col_hi) is materialised
  int32_t col_hi = 0;
  std::vector<int32_t> range_indptr;  // [queries + 1]
  std::vector<ColumnRange> ranges;    // [range_indptr.back()]: visible ranges, query by query
  int64_t visible_pairs = 0;          // sum over queries of visible columns

  std::span<const ColumnRange> ranges_of(int32_t q) const {
    const auto b = static_cast<size_t>(range_indptr[static_cast<size_t>(q)]);
    const auto e = static_cast<size_t>(range_indptr[static_cast<size_t>(q) + 1]);
    return {ranges.data() + b, e - b};
  }
  int32_t queries() const { return static_cast<int32_t>(range_indptr.size()) - 1; }
};

struct WorkUnit {
  int32_t row_plan = 0;  // index into the chunk's row plans
  int32_t kv_head = 0;
  int32_t q_begin = 0;  // queries [q_begin, q_end) of the row, times the group's q heads
  int32_t q_end = 0;
  int32_t col_lo = 0;  // hull of those queries' visible columns
  int32_t col_hi = 0;
  int64_t cost = 0;  // visible (query, column) pairs times group
};

// Materialised floats a chunk may hold (512 MiB).
inline constexpr int64_t kMaterialiseBudgetFloats = int64_t{1} << 27;

std::vector<RowPlan> plan_rows(const Layer& layer, const LogicalBatch& lb);

// Consecutive [begin, end) chunks of `rows` whose materialised Q, K and V stay under
// `budget_floats` (a row larger than the budget gets a chunk of its own).
std::vector<std::pair<size_t, size_t>> chunk_rows(std::span<const RowPlan> rows, const OracleShape& shape,
                                                  int64_t budget_floats);

// Materialised floats of one row: Q of its queries, K and V of its hull.
int64_t materialised_floats(const RowPlan& row, const OracleShape& shape);

// The units of a chunk, costliest first.
std::vector<WorkUnit> plan_units(std::span<const RowPlan> rows, const OracleShape& shape);

}  // namespace kvfuzz
