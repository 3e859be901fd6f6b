// libFuzzer target: every backend against the oracle and every single-case property, on
// structure-aware inputs (JSON cases mutated field by field). A finding aborts with its report,
// so libFuzzer keeps the input; replay it with `kvfuzz check <crash file>`.
//
//   build-fuzz/fuzz/targets/backends_fuzzer corpus/backends
#include <cstdint>
#include <cstdlib>
#include <iostream>

#include "backends/registry.h"
#include "fuzz/case_check.h"
#include "fuzz/targets/structured_mutator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const kvfuzz::Scenario s = kvfuzz::decode_case(data, size);
  const kvfuzz::CaseReport r = kvfuzz::check_all(s, kvfuzz::all_backends(), {});
  if (r.findings.empty()) return 0;
  for (const kvfuzz::Finding& f : r.findings) std::cerr << f.backend << ": " << f.property << ": " << f.message << "\n";
  std::cerr << kvfuzz::to_json(s);
  std::abort();
}
