// The exact oracle: what attention must return, from logical positions alone.
//
// Where it sits: beside the data flow, not in it. It takes the scenario's logical view
// (logical.h) and reads Q/K/V from the value source (values.h) by (request, column) — never
// through a pool, a page table or anything a planner builds — so a bug in the cache model or a
// planner cannot hide in the oracle too. For every layer, batch row, query and q head it computes
// softmax attention over exactly the visible columns, in double: output and natural-log LSE.
// A query that sees nothing gets output 0 and LSE -inf. GQA maps q head h to kv head
// h / (q_heads / kv_heads); MLA reads V as the first v_head_dim values of the single K head;
// softcap applies cap * tanh(s / cap) to the scaled logit s. Alongside, for error bounds: the
// softmax average of |V| and the norms that bound each query's logits.
//
// Work is split over independent (layer, row, head, query block) units with OpenMP; each unit is
// computed in a fixed order, so the result is bitwise the same for any thread count.
//
//   LogicalBatch lb = derive_logical(s);
//   OracleResult r = run_oracle(s, lb, ValueSource(s));
//   double o = r.out_at(layer, query, head)[d];
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "reference/logical.h"
#include "reference/scenario.h"
#include "reference/values.h"

namespace kvfuzz {

struct OracleResult {
  int32_t layers = 0;
  int64_t num_queries = 0;  // over all rows of the batch (LogicalBatch::q_indptr.back())
  int32_t q_heads = 0;
  int32_t v_head_dim = 0;
  std::vector<double> out;      // [layers][num_queries][q_heads][v_head_dim]
  std::vector<double> lse;      // [layers][num_queries][q_heads], natural log
  // What an error bound needs (properties/tolerance.h), computed alongside:
  std::vector<double> abs_out;  // [layers][num_queries][q_heads][v_head_dim]: sum_k w_k |v_kd|
  std::vector<double> qk_norm;  // [layers][num_queries][q_heads]: ||q|| * max ||k|| (2-norms), the max
                                // over a superset of the visible keys; 0 when none is visible

  std::span<const double> out_at(int32_t layer, int64_t query, int32_t head) const {
    const size_t i = ((static_cast<size_t>(layer) * num_queries + query) * q_heads + head) * v_head_dim;
    return {out.data() + i, static_cast<size_t>(v_head_dim)};
  }
  std::span<const double> abs_out_at(int32_t layer, int64_t query, int32_t head) const {
    const size_t i = ((static_cast<size_t>(layer) * num_queries + query) * q_heads + head) * v_head_dim;
    return {abs_out.data() + i, static_cast<size_t>(v_head_dim)};
  }
  double lse_at(int32_t layer, int64_t query, int32_t head) const {
    return lse[(static_cast<size_t>(layer) * num_queries + query) * q_heads + head];
  }
  double qk_norm_at(int32_t layer, int64_t query, int32_t head) const {
    return qk_norm[(static_cast<size_t>(layer) * num_queries + query) * q_heads + head];
  }
};

// threads = 0 uses OpenMP's default.
OracleResult run_oracle(const Scenario& s, const LogicalBatch& lb, const ValueSource& values, int threads = 0);

// Seconds this process has spent in run_oracle so far, summed over calls (calls on several
// threads at once add up): a campaign's time breakdown (kvfuzz run).
double oracle_seconds_spent();

}  // namespace kvfuzz
