// When a time-bounded campaign (kvfuzz run --seconds) starts another case.
//
// Where it sits: run_campaign (campaign.h) keeps one; its jobs ask may_start before each case and
// run_case tells it each check's time. --seconds bounds the whole campaign, shrinking included:
//  - When the deadline cut bounds every case in flight (deadline_cuts_checks: every adapter the
//    campaign's backends use runs on executor servers, whose requests in flight are dropped and
//    whose further requests are refused at the deadline, backends/external/adapter.h), a case
//    started late costs at most work thrown away, never an overrun: cases start until the deadline.
//  - Otherwise (per-job workers finish the request they run; in-process backends cannot be cut) a
//    case starts only when, as long as the median of the latest checks (expected_check), it would
//    end within the budget.
//
//   StartRule rule(60, deadline_cuts_checks(backends), /*jobs=*/4);
//   while (rule.may_start(elapsed())) rule.checked(check(next_case()));
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include "backends/backend.h"

namespace kvfuzz {

// Whether the deadline cut ends a check of any of `backends` in flight: each is a pair with an
// external half, and every adapter it uses runs on servers. What it runs in process (a built-in
// planner or checked executor, the properties) is not cut, but on servers it is the small part.
bool deadline_cuts_checks(const std::vector<const Backend*>& backends);

class StartRule {
 public:
  // `seconds` 0: no time limit. `jobs`: the campaign's jobs (the window of expected_check).
  StartRule(double seconds, bool cut_at_deadline, int jobs);

  // Whether a case starting `elapsed` seconds into the campaign may start.
  bool may_start(double elapsed) const;
  // A check took `seconds` (thread-safe).
  void checked(double seconds);
  // How long a case is expected to take: the median of the latest checks (0 before any).
  double expected_check() const;
  bool cut_at_deadline() const { return cut_at_deadline_; }

 private:
  double seconds_;
  bool cut_at_deadline_;
  mutable std::mutex mu_;
  std::vector<double> latest_;  // [window] the latest checks' seconds, a ring from next_
  size_t window_, next_ = 0;
};

}  // namespace kvfuzz
