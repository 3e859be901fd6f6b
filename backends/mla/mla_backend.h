// The mla backend: sglang's MLA attention backends (FlashMLA, cutlass MLA, AITER MLA) on the
// latent KV cache of MLA models (one KV head, V = first v_head_dim dims of K).
//
// Where it sits: one entry of backends/registry.cc. Planner: mla_plan_decode.cc (block tables for
// decode, verify, draft decode) and mla_plan_prefill.cc (gather CSR + linear layout descriptor);
// executor: mla_executor.cc; metadata checks: mla_plan_check.cc.
//
//   const Backend& b = mla_backend();
//   if (b.supports(s).ok) b.run(*b.plan({s, cache, batch, faults}), run_input, out);
#pragma once

#include "backends/backend.h"

namespace kvfuzz {

const Backend& mla_backend();

}  // namespace kvfuzz
