// `kvfuzz bench oracle`: how fast the exact oracle runs, next to what this machine can do.
//
// Where it sits: beside the oracle (oracle.h), for the command line. It measures, in one run, the
// machine's fp64 FMA peak (a register-resident FMA loop on every thread) and streaming read
// bandwidth, then the oracle on a prefill-heavy shape (judged against the FMA peak) and on a
// memory-bound decode shape (judged against the bandwidth): the attention kernel alone on
// materialised K/V, and end to end including reading values from the value source.
//
//   return run_oracle_bench(std::cout, /*threads=*/0);   // 0: OpenMP's default
#pragma once

#include <ostream>

namespace kvfuzz {

// Prints the report to `out`; returns 0.
int run_oracle_bench(std::ostream& out, int threads);

}  // namespace kvfuzz
