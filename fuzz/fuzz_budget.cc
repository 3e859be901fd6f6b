#include "fuzz/fuzz_budget.h"

#include <algorithm>

#include "fuzz/reductions.h"

namespace kvfuzz {
namespace {

// The measures a budget bounds, in FuzzBudget's field order.
FuzzBudget measure(const Scenario& s) {
  const CaseSize size = case_size(s);
  return {size.requests,
          size.max_tokens,
          size.history_ops,
          size.layers,
          s.model.q_heads,
          std::max(s.model.head_dim, s.model.v_head_dim),
          s.cache.page_size,
          std::max(static_cast<int32_t>(s.batch.entries.size()), s.batch.graph_bs)};
}

}  // namespace

bool FuzzBudget::admits(const Scenario& s) const {
  const FuzzBudget m = measure(s);
  return m.max_requests <= max_requests && m.max_tokens <= max_tokens && m.max_history_ops <= max_history_ops &&
         m.max_layers <= max_layers && m.max_q_heads <= max_q_heads && m.max_head_dim <= max_head_dim &&
         m.max_page_size <= max_page_size && m.max_batch <= max_batch;
}

FuzzBudget FuzzBudget::widened_to(const Scenario& s) const {
  const FuzzBudget m = measure(s);
  return {std::max(max_requests, m.max_requests),   std::max(max_tokens, m.max_tokens),
          std::max(max_history_ops, m.max_history_ops), std::max(max_layers, m.max_layers),
          std::max(max_q_heads, m.max_q_heads),     std::max(max_head_dim, m.max_head_dim),
          std::max(max_page_size, m.max_page_size), std::max(max_batch, m.max_batch)};
}

}  // namespace kvfuzz
