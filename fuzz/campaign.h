// A fuzz campaign: generated cases over the backends until a time or case budget is spent.
//
// Where it sits: the main job (`kvfuzz run`). Case i of a campaign is generate(hash(seed, i),
// profile i mod n), so a campaign is reproducible from its seed and any case from its number.
// Shard I of N runs its blocks of cases (shard.h: the same cases on any machine); `kvfuzz merge`
// (campaign_merge.h) joins the shards' folders into one campaign.
// Every finding goes to the index (OUT/index.jsonl, finding_index.h) as its case finishes, keyed by
// its fingerprint; the first cases of each fingerprint key are written at once, atomically, as a
// case file with its report and fingerprint record (so a killed run loses nothing), then shrunk
// while they keep the key and written again as a .min.json. A progress line shows cases/s,
// findings and how much of the configuration space the cases have touched. `seconds` bounds the
// whole campaign, shrinking included: a case starts until the deadline where the deadline cut
// bounds it, else only when it would end within the budget (start_rule.h), and a finding whose
// shrinking the budget (or `stop`) cuts short keeps its saved case.
//
//   CampaignOptions o;
//   o.seconds = 60; o.backends = all_backends(); o.out_dir = "findings";
//   CampaignSummary s = run_campaign(o, std::cerr);
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "fuzz/shard.h"
#include "fuzz/case_draw.h"
#include "fuzz/coverage.h"
#include "fuzz/coverage_counts.h"
#include "properties/metamorphic.h"
#include "reference/generate.h"

namespace kvfuzz {

// Mostly small cases (most bugs show there, and they are fast), one in eight medium (long
// contexts, large pages).
inline std::vector<Profile> default_profiles() {
  return {Profile::tiny, Profile::small, Profile::tiny, Profile::small, Profile::small, Profile::small, Profile::tiny, Profile::medium};
}

struct CampaignOptions {
  double seconds = 0;  // stop after this long (0: no time limit)
  int64_t cases = 0;   // stop after this many cases (0: no case limit)
  std::vector<const Backend*> backends;
  uint64_t seed = 1;
  int jobs = 1;
  std::string out_dir = "findings";
  std::vector<Profile> profiles = default_profiles();
  std::vector<std::string> faults;
  int metamorphic_every = 8;  // every n-th case also runs the metamorphic variants; 0: never
  bool shrink = true;
  double shrink_seconds = 30;
  // Each shape (page size, model, dtype: what a real kernel compiles a variant for) serves about
  // this many cases, a new one every reuse_shapes cases (case_draw.h); 0: every case its own.
  int reuse_shapes = 0;
  // When the campaign's time began (--seconds counts from it): kvfuzz run's own start, so that
  // starting the adapters (a GPU executor imports torch, its first server declares itself) is
  // inside the budget; unset: when run_campaign starts.
  std::optional<std::chrono::steady_clock::time_point> start;
  // With reuse_shapes: runs of this many consecutive cases share a shape (per profile), so an
  // executor server's batches fill (case_draw.h); 1: each case draws its own among the shapes.
  int shape_run = 1;
  // Seed of the shapes (default: `seed`). Kept fixed while `seed` changes, a campaign draws new
  // workloads on the shapes earlier campaigns compiled (a CI keeping its compile caches).
  std::optional<uint64_t> shape_seed;
  // With shape runs (shape_run > 1) and executor servers: the servers build the next run's kernel
  // variants while they serve the current run's cases (compile_ahead.h); true: --compile-ahead.
  bool compile_ahead = false;
  int max_saved_per_kind = 3;  // cases saved (and shrunk) per fingerprint key; the index keeps every finding
  int shard_index = 0, shard_count = 1;  // run part shard_index of shard_count (shard_rule)
  // Set from a signal handler to end early: no new case starts, shrinking stops at its next
  // attempt (the case stays saved as found), a case whose check ends after it is dropped (the
  // signal may have reached adapter workers too).
  const std::atomic<bool>* stop = nullptr;
  bool live_progress = true;  // rewrite one line (a terminal); else print a line every 10 s

  // The cases this shard runs: blocks of one case per profile (fuzz/shard.h).
  ShardRule shard_rule() const {
    return {shard_index, shard_count, static_cast<int64_t>(std::max<size_t>(1, profiles.size()))};
  }
};

struct FindingKind {
  int64_t count = 0;
  int64_t first_case = -1;
  std::string first_file;  // the saved case (shrunk when shrinking finished)
  std::string example;     // the first finding's message
};

// A root-cause group of a campaign (properties/root_cause.h): its cases and the keys seen in it.
struct RootGroup {
  int64_t cases = 0;
  int64_t last_case = -1;
  std::set<std::string> keys;
};

struct CampaignSummary {
  int64_t cases = 0;  // cases this run (this shard) checked
  double seconds = 0;
  bool stopped = false;                            // ended by `stop` (a signal) before its budget was spent
  std::map<std::string, FindingKind> kinds;        // by fingerprint key (properties/fingerprint.h); count: cases
  std::map<std::string, RootGroup> root_groups;    // by root key (properties/root_cause.h)
  int64_t cases_with_findings = 0;
  std::map<std::string, int64_t> backend_runs;     // cases offered to each backend, unsupported included
  std::map<std::string, int64_t> backend_unsupported;
  // Draws of the generator (case_draw.h): all, and per backend those outside its declared support
  // (drawn again when no backend supported them), so what a declaration leaves out is visible.
  int64_t draws = 0;
  std::map<std::string, int64_t> draws_unsupported;
  int64_t shapes = 0;                     // distinct shapes the cases ran on (reuse_shapes > 0)
  int64_t checked = 0;                    // cases some backend checked (not unsupported by all)
  double first_100_checked_seconds = -1;  // when the 100th of them finished (a cold start's figure)
  bool compile_ahead = false;             // warm-ups were sent ahead of the runs (compile_ahead.h)
  VariantTallies variants;          // metamorphic variants run and dropped (invalid, unsupported)
  int64_t harness_errors = 0;       // cases where kvfuzz's own checking code failed (not findings)
  std::string first_harness_error;  // its message and saved case
  Coverage coverage;
  CoverageCounts counts;  // cases checked per backend, mode x layer kind, page size, feature
  int64_t findings() const {
    int64_t n = 0;
    for (const auto& [k, v] : kinds) n += v.count;
    return n;
  }
};

CampaignSummary run_campaign(const CampaignOptions& options, std::ostream& progress);

// "I/N" (0 <= I < N, N <= 100000) as {I, N}: `kvfuzz run --shard` and campaign.json's settings.
std::optional<std::pair<int, int>> parse_shard(const std::string& text);

void print_summary(const CampaignSummary& s, std::ostream& out);

}  // namespace kvfuzz
