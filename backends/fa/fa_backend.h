// The fa backend: sglang's FlashAttentionBackend (flashattention_backend.py) driving
// flash_attn_with_kvcache — page tables from req_to_token (stride, then divide), SWA pool
// tables, chunked local attention by virtual batches, topk > 1 spec-decode cascades merged by LSE,
// CUDA-graph capture/replay buffers.
//
// Where it sits: registered in backends/registry.cc; planner fa_planner.h, executor
// fa_executor.h, metadata fa_plan.h, checks fa_check.cc, faults fa_faults.h.
//
//   const Backend& b = fa_backend();
//   auto plan = b.plan({scenario, cache, batch, {}});
#pragma once

#include "backends/backend.h"

namespace kvfuzz {

const Backend& fa_backend();

}  // namespace kvfuzz
