// The mla backend's planner and executor entry points (the Backend class in mla_backend.cc
// dispatches to these).
//
// Where it sits: PlanInput -> plan_latent_decode / plan_prefill -> MlaPlan -> run_mla.
//
//   std::unique_ptr<MlaPlan> p = plan_mla(in);
//   run_mla(*p, run_input, out);
#pragma once

#include <memory>

#include "backends/mla/mla_plan.h"

namespace kvfuzz::mla {

// DECODE, IDLE, TARGET_VERIFY, draft decode: block tables (mla_plan_decode.cc).
void plan_latent_decode(const PlanInput& in, MlaPlan& plan);
// EXTEND, MIXED, DRAFT_EXTEND_V2: gather CSR + linear layout descriptor (mla_plan_prefill.cc).
void plan_prefill(const PlanInput& in, MlaPlan& plan);

std::unique_ptr<MlaPlan> plan_mla(const PlanInput& in);
void run_mla(const MlaPlan& plan, const RunInput& in, RunOutput& out);

}  // namespace kvfuzz::mla
