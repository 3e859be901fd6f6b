// The FlashInfer planner: sglang's flashinfer_backend.py metadata for one forward batch.
//
// Where it sits: forward batch + cache -> **plan_flashinfer** -> FlashInferPlan -> executor.
// One planner, two kernel page sizes: 1 (what sglang does: kv_indices are token slots,
// kv_last_page_len all ones) or the cache's page size (FlashInfer's page-granular CSR).
// Per mode (sglang flashinfer_backend.py, FlashInferIndicesUpdater*):
//   DECODE / IDLE      paged CSR over seq_lens (window layers: the last min(seq_len, W+1) keys;
//                      chunked layers: from the chunk start);
//   EXTEND / MIXED     eager: ragged call over the new tokens (causal) + paged call over the
//                      prefix (non-causal), merged by merge_state (ragged only when no request
//                      has a prefix); CUDA graph (piecewise): one causal paged call over seq_lens,
//                      as sglang does when use_ragged is off;
//   TARGET_VERIFY      paged CSR over prefix + D drafts with the tree custom mask;
//   DRAFT_EXTEND_V2    one causal paged call over seq_lens (already prefix + extend);
//   draft decode       one row per (request, branch): prefix ++ the branch's steps 0..j.
//
//   std::unique_ptr<FlashInferPlan> p = plan_flashinfer(in, /*paged=*/true);
#pragma once

#include <memory>

#include "backends/backend.h"
#include "backends/flashinfer/flashinfer_plan.h"

namespace kvfuzz::flashinfer {

// Fault names (switches inside this planner).
inline constexpr const char* kFaultLastPageLenOverflow = "flashinfer_last_page_len_overflow";
inline constexpr const char* kFaultLseBaseMismatch = "flashinfer_lse_base_mismatch";
inline constexpr const char* kFaultSwaDecodeWindowShort = "flashinfer_swa_decode_window_short";
inline constexpr const char* kFaultSwaUntranslated = "flashinfer_swa_untranslated";

// paged = false: kernel page size 1 (sglang); true: the cache's page size.
std::unique_ptr<FlashInferPlan> plan_flashinfer(const PlanInput& in, bool paged);

// Lowest key position a query at `position` may see in `layer` (window: position - W; chunk:
// the chunk start). Negative positions (fully masked padded queries) give 0.
int64_t lowest_position(const Layer& layer, int64_t position);

}  // namespace kvfuzz::flashinfer
