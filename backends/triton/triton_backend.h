// The Triton backend: sglang's TritonAttnBackend (triton_backend.py with triton_ops/
// decode_attention.py and extend_attention.py) — token CSR metadata, split-KV decode, an extend
// kernel that reads the new tokens from the batch's k/v tensors.
//
// Where it sits: registry -> **triton_backend()** -> planner (triton_planner.h) and executor
// (triton_executor.h).
//
//   const Backend& b = triton_backend();
//   auto plan = b.plan({scenario, cache, batch, {}});
//   b.run(*plan, {scenario, cache, batch, pools, tensors}, out);
#pragma once

#include "backends/backend.h"

namespace kvfuzz {

const Backend& triton_backend();

}  // namespace kvfuzz
