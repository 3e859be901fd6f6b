// libFuzzer target: every backend against the oracle and every single-case property, on
// structure-aware inputs (JSON cases mutated field by field). A finding aborts with its report,
// so libFuzzer keeps the input; replay it with `kvfuzz check <crash file>`.
//
//   build-fuzz/fuzz/targets/backends_fuzzer corpus/backends
#include <cstdint>

#include "backends/registry.h"
#include "fuzz/case_check.h"
#include "fuzz/targets/abort_on_findings.h"
#include "fuzz/targets/structured_mutator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const kvfuzz::Scenario& s = kvfuzz::input_case(data, size);
  const kvfuzz::CaseReport r = kvfuzz::check_all(s, kvfuzz::all_backends(), {});
  kvfuzz::abort_on_findings(s, r);
  return 0;
}
