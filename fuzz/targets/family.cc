// libFuzzer target for one backend family: its backends against the oracle and every single-case
// property, on structure-aware inputs kept small (structured_mutator.h), so that coverage-guided
// fuzzing runs over a thousand cases a second under the sanitizers. One source, built once per
// family with -DKVFUZZ_FAMILY="fa" (fuzz/targets/CMakeLists.txt): fa, flashinfer (flashinfer and
// flashinfer_paged), triton, mla. A finding aborts with its report; replay the crash file with
// `kvfuzz check <crash file> --backend <backend>`.
//
//   build-fuzz/fuzz/targets/fa_fuzzer corpus/fa
#include <cstdint>
#include <string_view>
#include <vector>

#include "backends/registry.h"
#include "fuzz/case_check.h"
#include "fuzz/targets/abort_on_findings.h"
#include "fuzz/targets/structured_mutator.h"

#ifndef KVFUZZ_FAMILY
#error "build with -DKVFUZZ_FAMILY=\"fa\" (or flashinfer, triton, mla)"
#endif

namespace {

// The family's backends: the one named KVFUZZ_FAMILY and its variants (flashinfer_paged).
std::vector<const kvfuzz::Backend*> family_backends() {
  const std::string_view family = KVFUZZ_FAMILY;
  std::vector<const kvfuzz::Backend*> out;
  for (const kvfuzz::Backend* b : kvfuzz::all_backends()) {
    const std::string_view name = b->name();
    if (name == family || (name.starts_with(family) && name[family.size()] == '_')) out.push_back(b);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<const kvfuzz::Backend*> backends = family_backends();
  const kvfuzz::Scenario& s = kvfuzz::input_case(data, size);
  const kvfuzz::CaseReport r = kvfuzz::check_all(s, backends, {});
  if (r.backends_run == 0) return -1;  // the family cannot run this case: keep it out of the corpus
  kvfuzz::abort_on_findings(s, r);
  return 0;
}
