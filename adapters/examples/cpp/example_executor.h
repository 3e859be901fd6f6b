// The two C ABI entry points of a C++ example executor, around its family's code: the declaration,
// and a run that parses the manifest, turns exceptions into error messages and applies the
// broken variants that do not depend on the family (example_break.h).
//
// Where it sits: each family executor of adapters/examples/cpp/ ends with
//
//   KVFUZZ_EXPORT int kvfuzz_executor_declare(char* json, size_t capacity) {
//     return kvfuzz_example::declare(json, capacity, "cpp_page_table", "page_table", "...");
//   }
//   KVFUZZ_EXPORT int kvfuzz_executor_run(const kvfuzz_call* call) {
//     return kvfuzz_example::run(call, run_page_table);   // int run_page_table(call, manifest)
//   }
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include <nlohmann/json.hpp>

#include "adapters/examples/cpp/example_break.h"
#include "backends/external/kvfuzz_executor.h"

namespace kvfuzz_example {

// Every C++ example supports all modes, dtypes and page sizes, MLA and not, and computes in
// double (P and the output no coarser than fp32). Each is thread-safe (a call's state is its own;
// broken() is computed once, a thread-safe static): "thread_safe": true (kvfuzz_executor.h), so a
// server's kvfuzz-worker may run several requests at once (`--server-lanes`).
// `batch`: the executor takes several cases of one shape as one (PROTOCOL.md "batch"); any family's
// example declares it when KVFUZZ_EXAMPLE_BATCH=1 (a CPU stand-in for a batching GPU executor's
// server campaign: docs/gpu.md measures kvfuzz's own cost per case with it).
inline int declare(char* json, size_t capacity, const char* name, const char* family, const char* description,
                   bool batch = false) {
  nlohmann::json d = {
      {"kvfuzz_adapter", 1},
      {"name", name},
      {"role", "executor"},
      {"family", broken() == Break::declare_unknown_family ? "no_such_family" : family},
      {"description", description},
      {"supports", {{"modes", "all"}, {"dtypes", {"fp32", "fp16", "bf16"}}, {"page_sizes", "any"}, {"mla", true}, {"non_mla", true}}},
      {"precision", {{"p_dtype", "fp32"}, {"out_dtype", "fp32"}}}};
  d["thread_safe"] = true;
  const char* batch_env = std::getenv("KVFUZZ_EXAMPLE_BATCH");
  if (batch || (batch_env && std::string(batch_env) == "1")) d["batch"] = true;
  const std::string s = broken() == Break::declare_garbage ? std::string(name) + ", " + family : d.dump();
  if (s.size() + 1 > capacity) return 1;
  std::memcpy(json, s.c_str(), s.size() + 1);
  return 0;
}

// Calls family(call, manifest) -> 0 or a kvfuzz_fail code.
template <class Family>
int run(const kvfuzz_call* call, Family family) {
  if (call->version != KVFUZZ_EXECUTOR_VERSION)
    return kvfuzz_fail(call, "built for kvfuzz_call version %d, got %d", KVFUZZ_EXECUTOR_VERSION, call->version);
  switch (broken()) {
    case Break::unknown:
      return kvfuzz_fail(call, "KVFUZZ_EXAMPLE_BREAK names no broken variant (example_break.h lists them)");
    case Break::segfault: {
      int* volatile nowhere = nullptr;
      *nowhere = 1;  // a real write through a null pointer
      break;
    }
    case Break::hang:
      sleep(3600);
      break;
    default:
      break;
  }
  try {
    if (const int rc = family(call, nlohmann::json::parse(call->manifest_json)); rc != 0) return rc;
  } catch (const std::exception& e) {
    return kvfuzz_fail(call, "%s", e.what());
  }
  if (broken() == Break::oob_write) {
    const size_t n = call->out_bytes / sizeof(float);
    for (size_t i = 0; i < 16; ++i) call->out[n + i] = 0.0f;  // 64 bytes past the end of out
  }
  if (broken() == Break::write_input && call->q.bytes >= sizeof(float))
    static_cast<float*>(const_cast<void*>(call->q.data))[0] += 1.0f;  // an input is not the executor's to write
  return 0;
}

}  // namespace kvfuzz_example
