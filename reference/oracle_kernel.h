// The oracle's attention kernel: exact softmax attention of every work unit of a chunk.
//
// Where it sits: third step of run_oracle (oracle.cc), after the plan (oracle_plan.h) and the
// materialised Q/K/V (oracle_materialise.h). A unit (row, kv head, query block) walks its key hull
// (K/V of a streamed row are generated into the thread's scratch one block at a time)
// in blocks of tiles::kKeyBlock keys with an online softmax in double: S = Q K^T, scale, softcap,
// mask to each query's visible ranges, P = e^(S - running max) with rescaling of the running sum
// and output, O += P V (oracle_tiles.h). Units run in parallel in any order; each writes only its
// own queries and heads, in a fixed order, so the result is bitwise the same for every thread count.
//
//   attend(units, rows, lb, materialised, out_layer, lse_layer, threads);
#pragma once

#include <span>

#include "reference/logical.h"
#include "reference/oracle_materialise.h"
#include "reference/oracle_plan.h"

namespace kvfuzz {

// out_layer: [num_queries][q_heads][v_head_dim], lse_layer: [num_queries][q_heads] of one layer;
// only the queries of `rows` are written. threads = 0 uses OpenMP's default.
void attend(std::span<const WorkUnit> units, std::span<const RowPlan> rows, const LogicalBatch& lb,
            const Materialised& m, double* out_layer, double* lse_layer, int threads);

}  // namespace kvfuzz
