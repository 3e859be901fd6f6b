#include "fuzz/shrink.h"

#include <chrono>

#include "properties/fingerprint.h"
#include "reference/case_error.h"
#include "reference/validate.h"

namespace kvfuzz {

std::optional<Finding> fails_as(const Scenario& s, const ShrinkTarget& target) {
  try {
    validate(s);
  } catch (const InvalidCase&) {
    return std::nullopt;
  }
  const CaseReport r = check_all(s, {target.backend}, {target.faults, target.metamorphic, target.variant_seed});
  for (const Finding& f : r.findings)
    if ((target.fingerprint ? fingerprint_of(s, f).key() : f.signature()) == target.signature) return f;
  return std::nullopt;
}

ShrinkResult shrink(const Scenario& s, const ShrinkTarget& target, const ShrinkOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  ShrinkResult result{s, {}, 0, 0, 0};
  auto first = fails_as(s, target);
  if (!first) return result;
  result.finding = *first;
  // Spent when the next attempt, as long as the average one so far (the first check included),
  // would end past max_seconds.
  auto spent = [&] {
    const double t = elapsed(), per_attempt = t / (result.attempts + 1);
    return t + per_attempt > options.max_seconds || result.attempts >= options.max_attempts ||
           (options.stop != nullptr && options.stop->load());
  };
  bool progress = true;
  while (progress && !spent()) {
    progress = false;
    for (const Scenario& candidate : reductions(result.scenario, spent)) {
      if (spent()) break;
      ++result.attempts;
      if (auto f = fails_as(candidate, target)) {
        result.scenario = candidate;
        result.finding = *f;
        ++result.accepted;
        progress = true;
        break;
      }
    }
  }
  result.seconds = elapsed();
  return result;
}

}  // namespace kvfuzz
