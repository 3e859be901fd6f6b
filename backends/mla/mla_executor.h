// The mla executor's entry point: runs attention from an MlaPlan alone (mla_executor.cc).
//
// Where it sits: MlaPlan (mla_planner.h) + pools + batch tensors -> **run_mla** -> RunOutput ->
// properties. The Backend class in mla_backend.cc dispatches here.
//
//   run_mla(*plan, run_input, out);
#pragma once

#include "backends/mla/mla_plan.h"

namespace kvfuzz::mla {

void run_mla(const MlaPlan& plan, const RunInput& in, RunOutput& out);

}  // namespace kvfuzz::mla
