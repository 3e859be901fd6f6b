// set_kv_buffer: every executor first writes the step's new K/V into the cache, as production
// does before the attention kernel runs.
//
// Where it sits: the one write path of all executors. A write goes to the layer's pool — the SWA
// pool translates the full-pool slot through full_to_swa — and must land on the slot that holds
// the token it writes (padded rows write the dummy page 0); anything else is a Violation.
//
//   store_new_kv(layer, step_cache_locs(in.batch), in);
#pragma once

#include <cstdint>
#include <vector>

#include "backends/backend.h"

namespace kvfuzz {

// The full-pool slot each query token of the batch writes this step: out_cache_loc, or for
// draft_decode the current step's column of the [bs][topk][steps] layout; draft_q_only none.
std::vector<int64_t> step_cache_locs(const ForwardBatch& fb);

void store_new_kv(int32_t layer, const std::vector<int64_t>& locs, const RunInput& in);

}  // namespace kvfuzz
