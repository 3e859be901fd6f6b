// run_oracle with the time of each of its phases: what the oracle bench reports.
//
// Where it sits: beside oracle.h, for oracle_bench.cc. run_oracle (oracle.h) is this with the
// times thrown away. Per layer and row chunk: plan (oracle_plan.h), materialise Q/K/V from the
// value source (oracle_materialise.h), attention kernel (oracle_kernel.h).
//
//   OracleTimes t;
//   OracleResult r = run_oracle_timed(s, lb, ValueSource(s), threads, &t);
#pragma once

#include "reference/oracle.h"

namespace kvfuzz {

struct OracleTimes {
  double setup_s = 0;        // output allocation, visible ranges, chunks, work units
  double materialise_s = 0;  // reading Q and stored K/V from the value source
  double kernel_s = 0;       // attention, with the K/V of streamed rows generated block by block
};

OracleResult run_oracle_timed(const Scenario& s, const LogicalBatch& lb, const ValueSource& values, int threads,
                              OracleTimes* times);

}  // namespace kvfuzz
