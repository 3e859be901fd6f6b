// libFuzzer target: planners only — the metadata invariants (capacity, guard zones,
// stride/divide, extents) without executing attention, so many more cases per second.
//
//   build-fuzz/fuzz/targets/planners_fuzzer corpus/planners
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <stdexcept>

#include "backends/common/violation.h"
#include "backends/registry.h"
#include "fuzz/targets/structured_mutator.h"
#include "properties/case_context.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const kvfuzz::Scenario& s = kvfuzz::input_case(data, size);
  const kvfuzz::CaseContext ctx(s);
  for (const kvfuzz::Backend* b : kvfuzz::all_backends()) {
    if (!b->supports(s).ok) continue;
    std::string problem;
    try {
      auto plan = b->plan({s, ctx.prepared().cache, ctx.batch(), {}});
      plan->check_guards();
      kvfuzz::MetadataChecker check(s, ctx.prepared().cache, ctx.batch(),
                                    [&](int32_t l, int32_t row, int32_t c) { return ctx.visible_to_row(l, row, c); });
      plan->check_metadata(check);
      for (const auto& item : check.findings()) problem += item.property + ": " + item.message + "\n";
    } catch (const kvfuzz::Violation& v) {
      problem = std::string("in-bounds: ") + v.what() + "\n";
    } catch (const std::out_of_range& e) {
      problem = std::string("in-bounds: ") + e.what() + "\n";
    }
    if (!problem.empty()) {
      std::cerr << b->name() << ": " << problem << kvfuzz::to_json(s);
      std::abort();
    }
  }
  return 0;
}
