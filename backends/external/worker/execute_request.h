// One "execute" request answered through an executor library: the exchange folder in, out.npy
// and lse.npy per value set out. A request whose pools came sparse (exchange.h:
// kSparsePoolElements, the `long` profile) is answered unsupported: the C ABI hands libraries
// dense [slots][kv_heads][dim] pools, and materializing one of more than 2^26 elements per layer
// and value set is what the sparse form avoids.
//
// Where it sits: kvfuzz-worker's loop (worker_main.cc) calls it per request. It reads the manifest
// and arrays that kvfuzz wrote (backends/external/exchange.cc), puts every array in a guarded
// buffer (guarded_buffer.h), calls the library once per value set and checks the guards and the
// inputs after each call. Malformed requests throw; the library's own failures and writes out of
// bounds are results.
//
//   ExecuteResult r = execute_request(library, "/dev/shm/kvfuzz-12-adapter-0/r3");
//   if (!r.violations.empty()) ...  // property "in-bounds"
//   else if (!r.error.empty()) ...  // the library returned non-zero
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/external/worker/executor_library.h"

namespace kvfuzz::worker {

struct ExecuteResult {
  std::vector<std::string> violations;                    // writes out of bounds or into inputs
  std::string error;                                      // the library's message when it failed
  std::string unsupported;                                // why the request was not run (sparse pools)
  nlohmann::json seconds = nlohmann::json::object();      // {value set: seconds in the library}
  double read_seconds = 0;                                // reading the request's arrays into guarded buffers
  double write_seconds = 0;                               // writing out.npy and lse.npy
};

ExecuteResult execute_request(const ExecutorLibrary& library, const std::string& dir);

}  // namespace kvfuzz::worker
