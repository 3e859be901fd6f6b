// The Triton planner: forward batch -> TritonPlan, the way sglang's TritonAttnBackend
// init_forward_metadata (eager) and init_forward_metadata_replay_cuda_graph (CUDA graph) build it.
//
// Where it sits: PlanInput -> **plan_triton** -> TritonPlan -> executor. Faults are switches in
// here (PlanInput::fault), each reproducing a production bug; names in triton_fault_list().
//
//   std::unique_ptr<TritonPlan> p = plan_triton({scenario, cache, batch, faults});
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "backends/triton/triton_plan.h"

namespace kvfuzz {

namespace triton_fault {
inline constexpr std::string_view kSwaDecodeWindowShort = "triton_swa_decode_window_short";
inline constexpr std::string_view kGraphKvIndicesPages = "triton_graph_kv_indices_pages";
inline constexpr std::string_view kGraphVerifyNoDraftRoom = "triton_graph_verify_no_draft_room";
inline constexpr std::string_view kSeqLensSumUnpadded = "triton_seq_lens_sum_unpadded";
inline constexpr std::string_view kDraftExtendV2Prefix = "triton_draft_extend_v2_prefix";
}  // namespace triton_fault

std::vector<FaultInfo> triton_fault_list();

std::unique_ptr<TritonPlan> plan_triton(const PlanInput& in);

}  // namespace kvfuzz
