// Compile ahead: the executor servers build the kernel variants of the next runs of cases while
// they serve the current one.
//
// Where it sits: beside a campaign's jobs (campaign.cc), when its cases share shapes in runs
// (`--reuse-shapes`, `--shape-run` R > 1) and an external executor runs as servers
// (`--adapter-servers`). Case i is a pure function of the seed (case_draw.h), so the next runs'
// cases are known before they start: a thread draws them as the jobs will, and for each kernel
// variant (shape and mode, PairBackend) that a server's process has not run yet, plans a case of it
// and sends it to that server as a warm-up (Adapter::warm_up): a request outside any case, its
// answer discarded, never checked, never a finding; a failure retires the process as any failure
// on a server does, and is counted. A real kernel compiles or loads the variant there (FlashInfer's
// JIT, Triton, torch.compile), so the jobs' first requests of the run find it built.
//
// As many warm-ups at once as servers: one thread per server walks the cases of the four runs after
// the jobs' current one that no job has taken yet, each case taken by one thread, which sends it to
// the servers that lack its variant, idlest first, one after another (the first compiles into the
// kernel's cache on disk, the others load it into their own process). So different variants build
// at once on different servers (a compile is mostly one process's CPU work: nvcc, Triton, Inductor),
// where one thread would build them one after another. The jobs' requests meanwhile go to the servers
// not busy warming.
//
//   CompileAhead ahead(options, shapes, claimed);  // starts its thread when it applies
//   ... the jobs claim cases (claimed: how many this shard's jobs took) ...
//   ahead.finish();                                // after the jobs: waits for the warm-up in flight
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/external/pair_backend.h"
#include "fuzz/campaign.h"
#include "fuzz/case_draw.h"

namespace kvfuzz {

class CompileAhead {
 public:
  CompileAhead(const CampaignOptions& options, ShapePool& shapes, const std::atomic<int64_t>& claimed);
  ~CompileAhead() { finish(); }
  CompileAhead(const CompileAhead&) = delete;
  CompileAhead& operator=(const CompileAhead&) = delete;

  // Whether it runs: options.compile_ahead, shapes reused in runs, a backend with executor servers.
  bool on() const { return on_; }
  // No warm-up starts after it; those in flight end first.
  void finish();

 private:
  // One warm-up thread: takes the next case to look at (k_) until finish().
  void loop();
  // Warms this shard's k-th case (campaign case `index`) on the servers that have not run its
  // variants.
  void warm_case(int64_t k, int64_t index);
  int64_t index_of(int64_t k) const { return options_.shard_rule().case_at(k); }
  // This shard's first case at or after campaign case `index`.
  int64_t k_of(int64_t index) const { return options_.shard_rule().first_at_or_after(std::max<int64_t>(0, index)); }

  const CampaignOptions& options_;
  ShapePool& shapes_;
  const std::atomic<int64_t>& claimed_;
  std::vector<const PairBackend*> backends_;  // those with executor servers
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool on_ = false;
  int64_t k_ = 0;  // this shard's next case to look at, shared by the threads (under mu_)
  std::vector<std::thread> threads_;
};

}  // namespace kvfuzz
