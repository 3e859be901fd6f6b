// The mla planner's entry points (the Backend class in mla_backend.cc dispatches to plan_mla).
//
// Where it sits: PlanInput -> **plan_mla** -> plan_latent_decode / plan_prefill -> MlaPlan ->
// run_mla (mla_executor.h).
//
//   std::unique_ptr<MlaPlan> p = plan_mla(in);
#pragma once

#include <memory>

#include "backends/mla/mla_plan.h"

namespace kvfuzz::mla {

// DECODE, IDLE, TARGET_VERIFY, draft decode: block tables (mla_plan_decode.cc).
void plan_latent_decode(const PlanInput& in, MlaPlan& plan);
// EXTEND, MIXED, DRAFT_EXTEND_V2: gather CSR + linear layout descriptor (mla_plan_prefill.cc).
void plan_prefill(const PlanInput& in, MlaPlan& plan);

std::unique_ptr<MlaPlan> plan_mla(const PlanInput& in);

}  // namespace kvfuzz::mla
