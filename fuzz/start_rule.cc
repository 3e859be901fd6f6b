#include "fuzz/start_rule.h"

#include <algorithm>

#include "backends/external/pair_backend.h"

namespace kvfuzz {

bool deadline_cuts_checks(const std::vector<const Backend*>& backends) {
  if (backends.empty()) return false;
  for (const Backend* b : backends) {
    const auto* pair = dynamic_cast<const PairBackend*>(b);
    if (pair == nullptr) return false;  // a built-in backend: in process, never cut
    const Adapter* planner = pair->external_planner();
    const Adapter* executor = pair->external_executor();
    if (planner != nullptr && planner->server_count() == 0) return false;  // per-job workers finish
    if (executor != nullptr && executor->server_count() == 0) return false;
  }
  return true;
}

// The estimate is the median of the latest max(16, 2 * jobs) checks, not the mean of every check
// so far. A campaign's first cases are often its slowest by far: each kernel variant's first call
// compiles (FlashInfer's JIT: tens of seconds; later cases of the shape take well under one), one
// a job at once. The whole-campaign mean kept those compiles in the estimate long after: on an
// H200 flashinfer_mla's first 64 cases (64 jobs) took about 30 s each, so at 30.4 s of a 45 s
// campaign no job started another case. The median leaves out slow checks while they are fewer
// than half of the window, and the window forgets them after as many newer checks; twice the jobs
// (each job's first case may be slow) and at least 16, so one job's slow case never decides
// alone. The cost is on the other side: a case slower than the median (a medium-profile case
// among tiny ones) that starts just before the deadline ends past it by its own excess.
StartRule::StartRule(double seconds, bool cut_at_deadline, int jobs)
    : seconds_(seconds), cut_at_deadline_(cut_at_deadline), window_(static_cast<size_t>(std::max(16, 2 * jobs))) {
  latest_.reserve(window_);
}

void StartRule::checked(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  if (latest_.size() < window_) latest_.push_back(seconds);
  else latest_[next_] = seconds;
  next_ = (next_ + 1) % window_;
}

double StartRule::expected_check() const {
  std::vector<double> latest;
  {
    std::lock_guard<std::mutex> lock(mu_);
    latest = latest_;
  }
  if (latest.empty()) return 0;
  const auto middle = latest.begin() + static_cast<std::ptrdiff_t>(latest.size() / 2);  // the upper of two
  std::nth_element(latest.begin(), middle, latest.end());
  return *middle;
}

bool StartRule::may_start(double elapsed) const {
  if (seconds_ <= 0) return true;
  if (cut_at_deadline_) return elapsed < seconds_;
  return elapsed + expected_check() < seconds_;
}

}  // namespace kvfuzz
