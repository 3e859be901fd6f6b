// Plan of one oracle layer: visible ranges per query, row chunks, work units (oracle_plan.h).
#include "reference/oracle_plan.h"

#include <algorithm>
#include <cstdlib>

#include "reference/oracle_dispatch.h"

namespace kvfuzz {
namespace {

// Rows (query, q head) of a unit: enough that packing a key block is cheap next to using it,
// few enough that the unit's Q, O and one key block of K and V stay in a 1 MiB L2.
int32_t unit_rows(const OracleShape& shape) {
  return std::clamp(32768 / (shape.dp + shape.dvp), 16, 128);
}

}  // namespace

OracleShape oracle_shape(const Model& m) {
  OracleShape s;
  s.q_heads = m.q_heads;
  s.kv_heads = m.kv_heads;
  s.group = m.q_heads / m.kv_heads;
  s.head_dim = m.head_dim;
  s.v_head_dim = m.v_head_dim;
  s.dp = (m.head_dim + kOracleLanes - 1) / kOracleLanes * kOracleLanes;
  s.dvp = (m.v_head_dim + kOracleLanes - 1) / kOracleLanes * kOracleLanes;
  s.sm_scale = m.sm_scale;
  s.softcap = m.softcap;
  s.sinks = m.sinks.empty() ? nullptr : m.sinks.data();
  return s;
}

std::vector<RowPlan> plan_rows(const Layer& layer, const LogicalBatch& lb) {
  std::vector<RowPlan> plans(lb.rows.size());
  for (size_t r = 0; r < lb.rows.size(); ++r) {
    const LogicalRow& row = lb.rows[r];
    RowPlan& p = plans[r];
    p.row = static_cast<int32_t>(r);
    p.col_lo = INT32_MAX;
    p.col_hi = INT32_MIN;
    p.range_indptr.push_back(0);
    for (int32_t q = 0; q < static_cast<int32_t>(row.queries.size()); ++q) {
      for (const ColumnRange& c : visible(layer, row, q)) {
        p.ranges.push_back(c);
        p.col_lo = std::min(p.col_lo, c.begin);
        p.col_hi = std::max(p.col_hi, c.end);
        p.visible_pairs += c.end - c.begin;
      }
      p.range_indptr.push_back(static_cast<int32_t>(p.ranges.size()));
    }
    if (p.ranges.empty()) p.col_lo = p.col_hi = 0;
  }
  return plans;
}

int64_t materialised_floats(const RowPlan& row, const OracleShape& shape) {
  const int64_t cols = row.col_hi - row.col_lo;
  return int64_t{row.queries()} * shape.q_heads * shape.dp + cols * shape.kv_heads * (shape.dp + shape.dvp);
}

std::vector<std::pair<size_t, size_t>> chunk_rows(std::span<const RowPlan> rows, const OracleShape& shape,
                                                  int64_t budget_floats) {
  std::vector<std::pair<size_t, size_t>> chunks;
  size_t begin = 0;
  int64_t held = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    const int64_t f = materialised_floats(rows[r], shape);
    if (r > begin && held + f > budget_floats) {
      chunks.emplace_back(begin, r);
      begin = r;
      held = 0;
    }
    held += f;
  }
  if (begin < rows.size()) chunks.emplace_back(begin, rows.size());
  return chunks;
}

std::vector<WorkUnit> plan_units(std::span<const RowPlan> rows, const OracleShape& shape) {
  const int32_t block = std::max(1, unit_rows(shape) / shape.group);  // queries per unit
  // A query joins the open block only while its lowest visible column stays within `slack` of
  // the block's first: a block never straddles a chunk boundary or a far jump of the window.
  const int32_t slack = std::max(block, 64);
  std::vector<WorkUnit> units;
  for (size_t rp = 0; rp < rows.size(); ++rp) {
    const RowPlan& row = rows[rp];
    WorkUnit open{static_cast<int32_t>(rp), 0, 0, 0, INT32_MAX, INT32_MIN, 0};
    auto close = [&] {
      if (open.q_end == open.q_begin) return;
      if (open.col_lo > open.col_hi) open.col_lo = open.col_hi = 0;  // nothing visible
      for (int32_t h = 0; h < shape.kv_heads; ++h) {
        units.push_back(open);
        units.back().kv_head = h;
      }
    };
    int32_t first_lo = -1;  // lowest visible column of the open block's first query that sees any
    for (int32_t q = 0; q < row.queries(); ++q) {
      const auto ranges = row.ranges_of(q);
      const int32_t lo = ranges.empty() ? -1 : ranges.front().begin;
      const bool joins = open.q_end - open.q_begin < block &&
                         (first_lo < 0 || lo < 0 || std::abs(lo - first_lo) <= slack);
      if (!joins) {
        close();
        open = WorkUnit{static_cast<int32_t>(rp), 0, q, q, INT32_MAX, INT32_MIN, 0};
        first_lo = -1;
      }
      if (first_lo < 0) first_lo = lo;
      open.q_end = q + 1;
      for (const ColumnRange& c : ranges) {
        open.col_lo = std::min(open.col_lo, c.begin);
        open.col_hi = std::max(open.col_hi, c.end);
        open.cost += int64_t{c.end - c.begin} * shape.group;
      }
    }
    close();
  }
  // Costliest first, so a dynamic schedule ends evenly; ties keep plan order.
  std::stable_sort(units.begin(), units.end(), [](const WorkUnit& a, const WorkUnit& b) { return a.cost > b.cost; });
  return units;
}

}  // namespace kvfuzz
