#include "reference/logical.h"

#include <algorithm>
#include <map>

namespace kvfuzz {
namespace {

// Ancestors of `node` and the node itself, as ascending column ranges starting at `base`.
VisibleSet ancestor_ranges(const std::vector<int32_t>& parents, int32_t node, int32_t base) {
  std::vector<int32_t> nodes;
  for (int32_t n = node; n >= 0; n = parents[static_cast<size_t>(n)]) nodes.push_back(n);
  std::sort(nodes.begin(), nodes.end());
  VisibleSet out;
  for (int32_t n : nodes) {
    if (!out.empty() && out.back().end == base + n) out.back().end++;
    else out.push_back({base + n, base + n + 1});
  }
  return out;
}

LogicalRow causal_row(int32_t request, int32_t prefix, int32_t new_tokens) {
  LogicalRow row{request, prefix, prefix + new_tokens, {}, {}};
  for (int32_t j = 0; j < new_tokens; ++j) {
    row.new_positions.push_back(prefix + j);
    row.queries.push_back({prefix + j, prefix + j, {{prefix, prefix + j + 1}}});
  }
  return row;
}

LogicalRow verify_row(int32_t request, int32_t prefix, const std::vector<int32_t>& parents) {
  const auto d = static_cast<int32_t>(parents.size());
  LogicalRow row{request, prefix, prefix + d, {}, {}};
  for (int32_t i = 0; i < d; ++i) {
    row.new_positions.push_back(prefix + tree_depth(parents, i));
    row.queries.push_back({prefix + i, row.new_positions.back(), ancestor_ranges(parents, i, prefix)});
  }
  return row;
}

// Multi-step drafting: branch b's token of step s is column prefix + b * steps + s at position
// prefix + s; at step `step` branch b's query sees the prefix and its own steps 0..step.
LogicalRow draft_decode_row(int32_t request, int32_t prefix, int32_t topk, int32_t steps, int32_t step) {
  LogicalRow row{request, prefix, prefix + topk * steps, {}, {}};
  for (int32_t b = 0; b < topk; ++b) {
    for (int32_t s = 0; s < steps; ++s) row.new_positions.push_back(prefix + s);
  }
  for (int32_t b = 0; b < topk; ++b) {
    const int32_t first = prefix + b * steps;
    row.queries.push_back({first + step, prefix + step, {{first, first + step + 1}}});
  }
  return row;
}

// A drafter sharing the target's KV (draft_q_only): one query at the last committed position
// prefix - 1 reading the committed keys, no new column. Its Q is that column's (kvfuzz's Q is
// synthetic; the drafter's hidden state is not the target's, the keys it reads are).
LogicalRow q_only_row(int32_t request, int32_t prefix) {
  return LogicalRow{request, prefix, prefix, {}, {{prefix - 1, prefix - 1, {}}}};
}

}  // namespace

std::vector<std::pair<int32_t, int32_t>> committed_lengths(const Scenario& s) {
  std::map<int32_t, int32_t> len;
  for (const Op& op : s.history) {
    switch (op.kind) {
      case OpKind::admit: len[op.request] = 0; break;
      case OpKind::extend:
      case OpKind::share:
        len[op.request] += op.len;
        break;
      case OpKind::decode: len[op.request] += 1; break;
      case OpKind::accept: len[op.request] += static_cast<int32_t>(op.path.size()); break;
      case OpKind::free: len.erase(op.request); break;
      case OpKind::swa_evict:
      case OpKind::draft: break;
    }
  }
  return {len.begin(), len.end()};
}

LogicalBatch derive_logical(const Scenario& s) {
  const auto lengths = committed_lengths(s);
  auto prefix_of = [&](int32_t request) {
    auto it = std::lower_bound(lengths.begin(), lengths.end(), std::pair<int32_t, int32_t>{request, INT32_MIN});
    return it != lengths.end() && it->first == request ? it->second : 0;
  };
  const Batch& b = s.batch;
  LogicalBatch out;
  out.q_indptr.push_back(0);
  for (const BatchEntry& e : b.entries) {
    const int32_t prefix = prefix_of(e.request);
    switch (b.mode) {
      case Mode::idle: break;
      case Mode::decode: out.rows.push_back(causal_row(e.request, prefix, 1)); break;
      case Mode::extend:
      case Mode::mixed:
      case Mode::draft_extend_v2: out.rows.push_back(causal_row(e.request, prefix, e.extend_len)); break;
      case Mode::target_verify: out.rows.push_back(verify_row(e.request, prefix, e.parents)); break;
      case Mode::draft_decode:
        out.rows.push_back(draft_decode_row(e.request, prefix, b.topk, b.draft_steps, b.draft_step));
        break;
      case Mode::draft_q_only:
        out.rows.push_back(q_only_row(e.request, prefix));
        break;
    }
    out.q_indptr.push_back(out.q_indptr.back() + static_cast<int64_t>(out.rows.back().queries.size()));
  }
  return out;
}

int32_t lowest_visible_position(const Layer& layer, int32_t position) {
  switch (layer.kind) {
    case LayerKind::full: return 0;
    case LayerKind::sliding_window: return std::max(0, position - layer.window);
    case LayerKind::chunked: return position / layer.chunk * layer.chunk;
  }
  return 0;
}

VisibleSet visible(const Layer& layer, const LogicalRow& row, int32_t q) {
  const LogicalQuery& query = row.queries[static_cast<size_t>(q)];
  const int32_t lo = lowest_visible_position(layer, query.position);
  VisibleSet out;
  if (lo < row.prefix_len) out.push_back({lo, row.prefix_len});
  for (ColumnRange r : query.own) {
    // Positions grow with the column inside each structural range, so the window or chunk
    // keeps a suffix of it.
    while (r.begin < r.end && row.position_of(r.begin) < lo) {
      const int32_t skip = lo - row.position_of(r.begin);
      r.begin = std::min(r.end, r.begin + std::max(skip, 1));
    }
    if (r.begin >= r.end) continue;
    if (!out.empty() && out.back().end == r.begin) out.back().end = r.end;
    else out.push_back(r);
  }
  return out;
}

}  // namespace kvfuzz
