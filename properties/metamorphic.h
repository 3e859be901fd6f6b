// The multi-run properties: a request's output must not change when nothing it depends on does.
//
// Where it sits: beside check.h, on top of run_backend. Each variant rewrites the scenario in a
// way that keeps every batch request's logical content, runs the backend again (no oracle) and
// compares each request's outputs with the original run:
//   batch-order    the entries shuffled                                    (bitwise)
//   unrelated      some other entries dropped from the batch               (bitwise; tolerance
//                  with adaptive Triton splits, which follow the batch's lengths)
//   replay         CUDA-graph padding toggled: replay == eager on real rows (the same keys read,
//                  outputs within tolerance: a captured graph may use another kernel)
//   history        a finished request's churn before the history, so every page moves (bitwise)
//   page-size      page size 1 instead of ps (tables, CSRs and splits all change)  (tolerance)
//   kv-splits      another split count, and sometimes static <-> adaptive  (tolerance)
// "Bitwise" holds for the CPU executors, which reduce keys in logical order; external executors
// (records_reads() false), whose reduction order may follow the layout — flex attention visits
// tiles in physical-slot order — compare within tolerance instead.
//
//   std::vector<Finding> f = check_metamorphic(ctx, run, backend, faults, seed);
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "properties/check.h"

namespace kvfuzz {

struct Variant {
  std::string name;
  Scenario scenario;
  bool bitwise = true;
};

// What became of each kind of variant: run and compared, or dropped because it does not
// validate (invalid) or the backend does not support it (unsupported). Campaigns show the sums.
struct VariantTally {
  int64_t run = 0, invalid = 0, unsupported = 0;
};
using VariantTallies = std::map<std::string, VariantTally>;  // by variant name

// The variants of `s` (only those that validate; the others are counted in `tallies`). `seed`
// picks shuffles and drops.
std::vector<Variant> metamorphic_variants(const Scenario& s, uint64_t seed, VariantTallies* tallies = nullptr);

// Runs every variant and compares with `base`. Findings are named after the variant ("replay"
// for the padding one, "metamorphic" otherwise). `tallies`, when given, counts what was run and
// what was dropped.
std::vector<Finding> check_metamorphic(const CaseContext& ctx, const BackendRun& base, const Backend& backend,
                                       const std::vector<std::string>& faults, uint64_t seed,
                                       VariantTallies* tallies = nullptr);

}  // namespace kvfuzz
