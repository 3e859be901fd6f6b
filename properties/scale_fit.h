// Whether a wrong softmax scale explains a run's oracle disagreements: the name "values:scale".
//
// Where it sits: check_agreement (check.h) calls it once per run, on a few of the queries whose
// read set is right but whose output or LSE is not. For each such (layer, query, q head) it
// recomputes attention over the query's visible keys from the value source (as the oracle does)
// with the logits alpha * q.k (soft-capped after), finds the alpha > 0 whose LSE is the run's
// (lse(alpha) is convex: at most two), and keeps an alpha when, at it, every sampled query's
// output and LSE agree with the run within tolerance.h's bound. An executor whose LSE is in base
// 2 but whose outputs are right is not one (its outputs fit no other scale once a query has two
// keys of different logits); one query of one key fits any LSE error, so with only those the
// caller also asks that alpha be the same for all of them.
//
//   std::vector<ScaleSample> samples = {{layer, token, head, got_out, got_lse}};
//   if (auto alpha = fitted_scale(ctx, pm, samples)) ...;  // the scale the executor used
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "properties/case_context.h"
#include "properties/tolerance.h"

namespace kvfuzz {

struct ScaleSample {
  int32_t layer = 0;
  int64_t token = 0;        // a real row's query token
  int32_t head = 0;         // q head
  std::vector<double> out;  // [v_head_dim]: what the run returned
  double lse = 0;           // natural log, what the run returned
};

// The one softmax scale alpha > 0, more than 1% from the case's own, at which every sample agrees, if any.
std::optional<double> fitted_scale(const CaseContext& ctx, const PrecisionModel& pm,
                                   const std::vector<ScaleSample>& samples);

}  // namespace kvfuzz
