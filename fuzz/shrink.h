// The shrinker: reduces a failing case while it keeps failing the same way.
//
// Where it sits: campaigns shrink each finding before saving it; `kvfuzz shrink` does it for a
// case file. "The same way" is the finding's fingerprint key (the same property, backend, mode,
// layer kind and mechanism; campaigns and `kvfuzz shrink`) or its signature (the same property on
// the same backend; the fault benchmark).
// Greedy: try the reductions (reductions.h) in order, keep the first that validates and still
// fails, start over; stop when none does, or the budget would be spent before the next attempt
// ends (attempts of about equal length), or `stop` is set.
//
//   ShrinkResult r = shrink(s, target, {.max_seconds = 60});
//   write_file_atomic("min.json", to_json(r.scenario));
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/case_check.h"
#include "fuzz/reductions.h"

namespace kvfuzz {

struct ShrinkTarget {
  std::string signature;             // Finding::signature(): property/backend; with `fingerprint`,
                                     // the fingerprint key (properties/fingerprint.h)
  const Backend* backend = nullptr;
  std::vector<std::string> faults;
  bool metamorphic = false;          // the finding came from a metamorphic variant
  uint64_t variant_seed = 0;         // the seed its variants were drawn with (CheckOptions)
  bool fingerprint = false;          // keep the fingerprint key, not only property and backend
};

struct ShrinkOptions {
  double max_seconds = 60;
  int32_t max_attempts = 5000;
  const std::atomic<bool>* stop = nullptr;  // when set, stop before the next attempt (a signal)
};

struct ShrinkResult {
  Scenario scenario;
  Finding finding;     // the finding on the shrunk case
  int32_t attempts = 0;
  int32_t accepted = 0;
  double seconds = 0;
};

// The first finding of `s` with `target.signature` (or fingerprint key), if any.
std::optional<Finding> fails_as(const Scenario& s, const ShrinkTarget& target);

// `s` must fail as `target` (else returns it unchanged with an empty finding).
ShrinkResult shrink(const Scenario& s, const ShrinkTarget& target, const ShrinkOptions& options);

}  // namespace kvfuzz
