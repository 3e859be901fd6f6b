// The FlashInfer backends: sglang's flashinfer_backend.py planning and a CPU executor of the
// FlashInfer kernels it calls.
//
// Where it sits: registry -> **these backends** -> planner (flashinfer_planner.h) + executor
// (flashinfer_executor.h). Two registered variants of one planner, differing in the kernel page
// size: `flashinfer` plans like sglang (page size 1: kv_indices are token slots, kv_last_page_len
// all ones) whatever the cache's page size; `flashinfer_paged` plans FlashInfer's paged CSR at the
// cache's page size (kv_indices are page ids, kv_last_page_len in [1, ps]).
//
//   const Backend& b = flashinfer_paged_backend();
//   auto plan = b.plan({scenario, cache, batch, {"flashinfer_lse_base_mismatch"}});
//   b.run(*plan, {scenario, cache, batch, pools, tensors}, out);
#pragma once

#include "backends/backend.h"

namespace kvfuzz {

const Backend& flashinfer_backend();
const Backend& flashinfer_paged_backend();

}  // namespace kvfuzz
