// The FlashInfer executor: runs each layer's wrapper calls from the plan alone.
//
// Where it sits: FlashInferPlan -> **run_flashinfer** -> RunOutput. Per layer it writes the
// step's new K/V (set_kv_buffer), runs every kernel row of the layer group's calls through
// attend_row — paged rows address keys with paged_csr_slot over kv_indices and the length
// paged_csr_length(pages, kv_last_page_len), ragged rows read the batch's k/v — and combines the
// calls with the plan's merge_state kernel. FlashInfer's kernels return base-2 LSEs
// (attention/state.cuh get_lse = m + log2(d)); they stay base 2 up to the output, which wants
// natural log.
//
//   run_flashinfer(plan, in, out);
#pragma once

#include "backends/backend.h"
#include "backends/flashinfer/flashinfer_plan.h"

namespace kvfuzz::flashinfer {

void run_flashinfer(const FlashInferPlan& plan, const RunInput& in, RunOutput& out);

}  // namespace kvfuzz::flashinfer
