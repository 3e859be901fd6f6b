// The oracle's attention kernel: exact softmax attention of every work unit of a chunk.
//
// Where it sits: third step of run_oracle (oracle.cc), after the plan (oracle_plan.h) and the
// materialised Q/K/V (oracle_materialise.h). A unit (row, kv head, query block) walks its key hull
// in blocks of kKeyBlock keys (a streamed row's K/V generated into the thread's scratch,
// block by block) with an online softmax in double: S = Q K^T, scale, softcap,
// mask to each query's visible ranges, P = e^(S - running max) with rescaling of the running sum
// and output, O += P V (oracle_tiles.h); alongside, the same average of |V| and the largest key
// norm (what properties/tolerance.h bounds errors with). The unit's code is that of the ISA in use
// (oracle_isa_kernels.cc through oracle_dispatch.h). Units run in parallel in any order; each
// writes only its own queries and heads, in a fixed order, so the result is bitwise the same for
// every thread count and every ISA.
//
//   attend(units, rows, lb, materialised, {out, lse, abs_out, qk_norm}, threads);
#pragma once

#include <span>

#include "reference/logical.h"
#include "reference/oracle_materialise.h"
#include "reference/oracle_plan.h"

namespace kvfuzz {

// One layer's results (OracleResult's arrays at that layer).
struct LayerOut {
  double* out;      // [num_queries][q_heads][v_head_dim]
  double* lse;      // [num_queries][q_heads]
  double* abs_out;  // [num_queries][q_heads][v_head_dim]: sum_k w_k |v_kd|
  double* qk_norm;  // [num_queries][q_heads]: ||q|| * max ||k|| over the unit's key hull
};

// Writes only the queries of `rows`. threads = 0 uses OpenMP's default.
void attend(std::span<const WorkUnit> units, std::span<const RowPlan> rows, const LogicalBatch& lb,
            const Materialised& m, const LayerOut& layer, int threads);

}  // namespace kvfuzz
