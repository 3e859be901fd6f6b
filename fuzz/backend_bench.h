// Cases checked per second for each backend, on the same generated cases, in one run.
//
// Where it sits: `kvfuzz bench backends`. For each case the oracle runs once (timed apart), then
// every backend plans, runs and is checked (every single-case property); a backend's rate counts
// only the cases it supports.
//
//   print_backend_bench(run_backend_bench(all_backends(), Profile::small, 500, 1), std::cout);
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "reference/generate.h"

namespace kvfuzz {

struct BackendRate {
  std::string name;
  int64_t cases = 0;        // supported cases checked
  int64_t unsupported = 0;
  double seconds = 0;       // planning, running and checking
};

struct BackendBench {
  int64_t cases = 0;
  double generate_seconds = 0, oracle_seconds = 0;
  std::vector<BackendRate> rates;
};

BackendBench run_backend_bench(const std::vector<const Backend*>& backends, Profile profile, int64_t cases, uint64_t seed);
void print_backend_bench(const BackendBench& b, std::ostream& out);

}  // namespace kvfuzz
