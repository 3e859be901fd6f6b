#include "fuzz/compile_ahead.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "backends/common/kv_pools.h"
#include "fuzz/case_check.h"
#include "properties/case_context.h"

namespace kvfuzz {
namespace {

// How many runs past the jobs' current one are warmed: a compile may take longer than a run
// (FlashInfer's JIT: 10-80 s; a run of 64 cases: a few seconds), and each variant is warmed once a
// server, so looking further only moves the same work earlier (up to this many runs of it wasted
// when a time-bounded campaign ends).
constexpr int64_t kRunsAhead = 4;

}  // namespace

CompileAhead::CompileAhead(const CampaignOptions& options, ShapePool& shapes, const std::atomic<int64_t>& claimed)
    : options_(options), shapes_(shapes), claimed_(claimed) {
  if (!options.compile_ahead || options.reuse_shapes <= 0 || options.shape_run <= 1) return;
  for (const Backend* b : options.backends)
    if (const auto* pair = dynamic_cast<const PairBackend*>(b);
        pair && pair->external_executor() && pair->external_executor()->server_count() > 0)
      backends_.push_back(pair);
  on_ = !backends_.empty();
  size_t servers = 0;
  for (const PairBackend* b : backends_) servers = std::max(servers, b->external_executor()->server_count());
  for (size_t i = 0; on_ && i < servers; ++i) threads_.emplace_back(&CompileAhead::loop, this);
}

void CompileAhead::finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
}

void CompileAhead::loop() {
  const int64_t run = options_.shape_run;
  std::unique_lock<std::mutex> lock(mu_);
  while (!done_ && !(options_.stop && options_.stop->load())) {
    // The jobs are in the run of their latest case: look at the next runs' cases no job took yet.
    const int64_t claimed = claimed_.load();
    const int64_t next_run = (index_of(std::max<int64_t>(claimed, 1) - 1) / run + 1) * run;
    k_ = std::max({k_, claimed, k_of(next_run)});
    const int64_t k = k_, index = index_of(k);
    if (index >= next_run + kRunsAhead * run || (options_.cases > 0 && index >= options_.cases)) {
      cv_.wait_for(lock, std::chrono::milliseconds(10));
      continue;
    }
    ++k_;  // this thread's case
    lock.unlock();
    warm_case(k, index);
    lock.lock();
  }
}

void CompileAhead::warm_case(int64_t k, int64_t index) {
  const Profile profile = options_.profiles[static_cast<size_t>(index) % options_.profiles.size()];
  const CaseDraw draw = draw_case(shapes_, index, profile, options_.reuse_shapes, options_.shape_run);
  if (!draw.supported) return;
  const Scenario& s = draw.scenario;
  std::optional<CaseContext> ctx;
  for (const PairBackend* b : backends_) {
    if (!runnable(*b, s).ok) continue;
    const std::vector<size_t> cold = b->cold_servers(s);
    if (cold.empty()) continue;
    try {
      if (!ctx) ctx.emplace(s);
      const Prepared& p = ctx->prepared();
      const std::vector<std::string> faults = faults_for(*b, options_.faults);
      const std::unique_ptr<Plan> plan = b->plan({s, p.cache, p.batch, faults});
      // The request of the case's main value set, as check_all sends it to an opaque executor.
      KvPools pools(s, p.cache, value_fn(ctx->values()), s.values.poison ? finite_poison(s.values.dtype) : Poison{});
      for (const size_t server : cold) {
        if (claimed_.load() > k) return;  // a job took the case meanwhile
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (done_) return;
        }
        if (!b->warm_up(*plan, {s, p.cache, p.batch, pools, ctx->tensors()}, server)) break;  // not sent again
      }
    } catch (const std::exception&) {
      // a planner's failure (an external planner's crash, ...) is for the case's own check to find
    }
  }
}

}  // namespace kvfuzz
