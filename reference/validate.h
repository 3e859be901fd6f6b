// The one place that decides whether a Scenario is well formed.
//
// Where it sits: every front end calls validate() before anything else touches a case; past it,
// the simulator, the oracle and the planners may assume a valid case. It checks fields against
// limits.h, the consistency between them (GQA divisibility, MLA shape, chunk a multiple of the
// page size, trees that are trees, each field used only where its mode uses it) and then replays
// the history (pools never exhausted, ops only on live requests, lengths within the context).
//
//   validate(s);   // throws InvalidCase("history[12]: request 3 is not admitted")
//   if (!is_valid(candidate)) continue;
#pragma once

#include <string>

#include "reference/cache.h"
#include "reference/scenario.h"

namespace kvfuzz {

void validate(const Scenario& s);

// validate() as a predicate: false, with InvalidCase's message in `why` when given, for an
// invalid case.
bool is_valid(const Scenario& s, std::string* why = nullptr);

// The K and V values the case's pools hold written (kv_pools.h stores nothing else): live tokens
// of each layer's pool times kv_heads x (head_dim + v_head_dim), summed over layers. validate()
// bounds it by limits::kMaxWrittenPoolFloats.
//   int64_t v = written_pool_values(s, prepare(s).cache);
int64_t written_pool_values(const Scenario& s, const CacheState& cache);

// True when the sequence is a spec-decode tree of `parents.size()` nodes: parents[0] == -1,
// 0 <= parents[i] < i, and (topk > 0) no node has more than topk children. Writes the reason
// to `why` otherwise.
bool is_tree(const std::vector<int32_t>& parents, int32_t topk, std::string* why);

}  // namespace kvfuzz
