// Candidate simplifications of a scenario, most effective first: what the shrinker tries.
//
// Where it sits: under shrink.h. Each candidate changes one thing — drops a batch entry, a
// request, a run of history ops or a layer; shortens an extend; prunes a tree; lowers heads, head
// dims or the page size; turns values into position signatures. Candidates may be invalid; the
// shrinker validates each.
//
//   for (const Scenario& smaller : reductions(s)) if (still_fails(smaller)) { s = smaller; break; }
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "reference/scenario.h"

namespace kvfuzz {

std::vector<Scenario> reductions(const Scenario& s);
// The same, one family at a time (tightenings, batch, history, model, cache, values), asking
// `spent` before each: a large case's candidates take seconds to make, and a shrinker with a
// deadline or a stop signal takes only the families it has time for.
std::vector<Scenario> reductions(const Scenario& s, const std::function<bool()>& spent);

// How big a case is, as a person reading it sees it.
struct CaseSize {
  int32_t requests = 0;        // distinct requests in the history and the batch
  int32_t max_tokens = 0;      // the most tokens any request holds (history and this step)
  int32_t history_ops = 0;
  int32_t layers = 0;
};
CaseSize case_size(const Scenario& s);

}  // namespace kvfuzz
