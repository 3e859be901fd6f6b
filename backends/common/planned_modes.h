// The forward modes kvfuzz's own planners (sglang's backends) plan: every Mode but draft_q_only,
// which is vLLM's Gemma-4 drafting step (a drafter whose layers share the target's KV) and is
// planned only by the vLLM adapter (adapters/vllm/draft_groups.py). Executors run it (it writes
// nothing: kv_store.h).
//
//   refuse_unplanned_mode(in.batch, "fa");   // first thing in a planner: BackendUnsupported
#pragma once

#include <string>
#include <string_view>

#include "backends/common/backend_failure.h"
#include "reference/forward_batch.h"

namespace kvfuzz {

inline void refuse_unplanned_mode(const ForwardBatch& fb, std::string_view planner) {
  if (fb.mode == Mode::draft_q_only)
    throw BackendUnsupported(std::string(planner) +
                             " plans no draft_q_only step: kvfuzz models it as vLLM's Gemma-4 drafting step "
                             "(Gemma4Proposer, Gemma4Speculator), planned by the vLLM adapter");
}

}  // namespace kvfuzz
