// What each query of the batch must see, from logical positions alone.
//
// Where it sits: the oracle's view of a scenario. It replays only the lengths of the history (no
// pages, no slots, no tables) and lays out each batch row as key *columns* — logical token ids
// whose K/V the value source defines — with a position per column. The visible set of a query is
// SEMANTICS.md §3: its structural keys (causal; tree ancestors; its own draft branch) cut by the
// layer's rule on positions (window, chunk). Planners never include this file; the properties use
// it to say what a query should have read.
//
//   LogicalBatch lb = derive_logical(scenario);
//   for (ColumnRange r : visible(layer, lb.rows[0], /*query=*/0)) { ... }
#pragma once

#include <cstdint>
#include <vector>

#include "reference/scenario.h"

namespace kvfuzz {

struct ColumnRange {
  int32_t begin = 0;  // first column
  int32_t end = 0;    // one past the last
  bool operator==(const ColumnRange&) const = default;
};

// Disjoint, ascending.
using VisibleSet = std::vector<ColumnRange>;

struct LogicalQuery {
  int32_t column = 0;    // the query token's own column
  int32_t position = 0;  // its position
  // Structurally visible columns past the prefix (ascending): causal tokens, tree ancestors and
  // itself, or its own draft branch.
  VisibleSet own;
};

struct LogicalRow {
  int32_t request = 0;     // scenario request id
  int32_t prefix_len = 0;  // committed tokens before this step: columns [0, prefix_len)
  int32_t kv_cols = 0;     // all key columns of the row, committed and new
  // Position of column prefix_len + i, for the new columns.
  std::vector<int32_t> new_positions;
  std::vector<LogicalQuery> queries;

  int32_t position_of(int32_t column) const {
    return column < prefix_len ? column : new_positions[static_cast<size_t>(column - prefix_len)];
  }
};

struct LogicalBatch {
  std::vector<LogicalRow> rows;   // one per batch entry, in batch order
  std::vector<int64_t> q_indptr;  // [rows + 1]: queries of row i are q_indptr[i] .. q_indptr[i+1)
};

// Committed length of every live request after the history (ids not live are absent).
std::vector<std::pair<int32_t, int32_t>> committed_lengths(const Scenario& s);

// Requires a valid scenario (validate.h) except for the work limit, which is computed from this.
LogicalBatch derive_logical(const Scenario& s);

// The columns query `q` of `row` may read in `layer`.
VisibleSet visible(const Layer& layer, const LogicalRow& row, int32_t q);

// Lowest position a query at `position` may see in `layer`.
int32_t lowest_visible_position(const Layer& layer, int32_t position);

}  // namespace kvfuzz
