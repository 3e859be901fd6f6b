// The Triton executor: runs one layer's attention from a TritonPlan alone, the way sglang's
// decode_attention.py and extend_attention.py kernels consume that metadata.
//
// Where it sits: TritonPlan + pools + batch tensors -> **executor** -> RunOutput. The caller has
// written the step's new K/V (store_new_kv) first, as forward_decode / forward_extend do.
//   decode kernel: stage 1 runs every (kernel row, split) of the MAX_KV_SPLITS grid through
//     attend_row into that split's partial (output + natural-log LSE, attn_logits / attn_lse);
//     empty splits are skipped; stage 2 merges the non-empty ones in split order (merge_state).
//     A row without keys keeps output 0 and LSE -inf (production stage 2 would divide 0 by 0).
//   extend kernel: one attend_row per request over prefix keys (kv_indices, the layer's pool)
//     followed by the new tokens (k_extend: ReadSource::batch) — ONE softmax, as the kernel's two
//     stages share their running max and sum. Stage 1 reads every prefix key (the custom mask's
//     prefix columns are skipped, skip_prefix_custom_mask); stage 2 applies the causal rule, or
//     the verify mask at mask_indptr[i] + m * (prefix + ext + offset) + offset + prefix + n.
//     Window layers add pos_q - pos_k <= W, chunked ones pos_k >= floor(pos_q / C) * C.
//
//   run_triton_layer(plan, ctx);
#pragma once

#include "backends/attend.h"
#include "backends/triton/triton_plan.h"

namespace kvfuzz {

void run_triton_layer(const TritonPlan& plan, LayerContext& ctx);

}  // namespace kvfuzz
