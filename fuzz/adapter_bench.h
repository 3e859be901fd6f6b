// What the worker protocol costs: an external executor through its worker against the same
// executor's own time in its process, on the same cases, in one run.
//
// Where it sits: `kvfuzz bench adapter`. For each generated case the pair backend plans with
// kvfuzz's planner and runs the case's main value set through the worker (the round trip kvfuzz
// sees); the adapter reports how long its function took inside that call (the executor in
// process: arrays already loaded, nothing exchanged). kvfuzz's own checked executor of the family
// runs the same plans in process too, for scale.
//
//   print_adapter_bench(run_adapter_bench(*pair, Profile::small, 300, 1), std::cout);
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "backends/external/pair_backend.h"
#include "reference/generate.h"

namespace kvfuzz {

struct AdapterBench {
  std::string backend, builtin;
  int64_t cases = 0, supported = 0;
  double worker_seconds = 0;    // round trips through the worker
  double function_seconds = 0;  // the adapter's own function, as it reports
  double builtin_seconds = 0;   // kvfuzz's executor of the family, in process
};

AdapterBench run_adapter_bench(const PairBackend& pair, Profile profile, int64_t cases, uint64_t seed);
void print_adapter_bench(const AdapterBench& b, std::ostream& out);

}  // namespace kvfuzz
