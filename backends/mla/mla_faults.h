// The planner bugs the mla backend can switch on (Backend::faults), by name.
//
// Where it sits: the mla planners (mla_plan_decode.cc, mla_plan_prefill.cc) test these names
// with PlanInput::fault(); mla_backend.cc describes them for `kvfuzz backends`.
//
//   if (in.fault(kFaultPrefillBlockSizePage)) block_size = page_size;
#pragma once

#include <string_view>

namespace kvfuzz::mla {

// sglang #25556 (AITER make_mla_prefill_ps_meta_data): the prefill layout descriptor says
// block_size = page size for K/V that the gather made linear, one token per entry.
inline constexpr std::string_view kFaultPrefillBlockSizePage = "mla_prefill_block_size_page";
// sglang #24587 and the second half of #25556: the CUDA-graph kv_indices buffer counted in pages
// (max_bs * ceil(max_context_len / ps)) but written one entry per token.
inline constexpr std::string_view kFaultGraphKvIndicesPages = "mla_graph_kv_indices_pages";
// sglang #27485 (aiter MLA verify): CUDA-graph verify buffers sized for the verified seq_len,
// without the room for the D draft tokens each row also reads.
inline constexpr std::string_view kFaultGraphVerifyNoDraftRoom = "mla_graph_verify_no_draft_room";
// sglang #27338 / #27460: the multi-step draft CUDA-graph block table lacks the topk factor.
inline constexpr std::string_view kFaultDraftGraphNoTopk = "mla_draft_graph_no_topk";

}  // namespace kvfuzz::mla
