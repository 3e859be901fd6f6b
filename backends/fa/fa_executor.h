// The fa executor: runs a FaPlan the way flash_attn_with_kvcache runs its metadata, on the CPU.
//
// Where it sits: FaPlan -> **run_fa** -> RunOutput -> properties. Per layer it first writes the
// step's new K/V (store_new_kv, production's set_kv_buffer), then runs every call of the layer's
// group — for kernel row b: queries = batch tokens [cu_seqlens_q[b], cu_seqlens_q[b+1]), keys
// k < cache_seqlens[b] at page_table_slot(page_table, b * width, k, view_page_size), causal
// bottom-right (causal_last_key) and/or the layer's left window — and merges the calls by LSE.
//
//   run_fa(plan, in, out);
#pragma once

#include "backends/fa/fa_plan.h"

namespace kvfuzz::fa {

void run_fa(const FaPlan& plan, const RunInput& in, RunOutput& out);

}  // namespace kvfuzz::fa
