#include "fuzz/campaign.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "backends/common/deadline.h"
#include "backends/external/adapter.h"
#include "backends/registry.h"
#include "fuzz/campaign_record.h"
#include "fuzz/case_check.h"
#include "fuzz/compile_ahead.h"
#include "fuzz/finding_index.h"
#include "fuzz/replay.h"
#include "fuzz/shrink.h"
#include "fuzz/start_rule.h"
#include "properties/fingerprint.h"
#include "properties/root_cause.h"
#include "reference/io.h"
#include "reference/rng.h"
#include "reference/scenario_json.h"

namespace kvfuzz {
namespace {

using Clock = std::chrono::steady_clock;

std::string file_safe(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '-';
  return s;
}

bool stopping(const CampaignOptions& o) { return o.stop != nullptr && o.stop->load(); }

// Shared state of the workers; everything behind `mu` except the counters.
struct Shared {
  const CampaignOptions& options;
  std::atomic<int64_t> next{0}, done{0};
  StartRule start_rule;  // whether a job starts another case (told each check's time)
  std::atomic<bool> workers_done{false};
  std::mutex mu;
  CampaignSummary summary;
  std::map<std::string, int64_t> saved;  // cases saved per fingerprint key
  FindingIndex index;                    // every finding, never capped
  ShapePool shapes;                      // the campaign's shapes (case_draw.h)
  std::set<uint64_t> shapes_used;
  Clock::time_point start;  // the campaign's start (run_campaign reads it too)

  explicit Shared(const CampaignOptions& o)
      : options(o),
        start_rule(o.seconds, deadline_cuts_checks(o.backends), std::max(1, o.jobs)),
        index(o.out_dir),
        shapes(o.seed, o.shape_seed.value_or(o.seed), o.backends),
        start(o.start.value_or(Clock::now())) {}
};

// Short and stable (FNV-1a, the same on every machine and compiler): tells apart the saved
// files of two fingerprints of one case.
std::string key_tag(const std::string& key) {
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 6; ++i) out += hex[(h >> (4 * i)) & 15];
  return out;
}

// The findings of one case that share a fingerprint key.
struct KeyGroup {
  Fingerprint fingerprint;
  std::vector<Finding> findings;
  RootCause root;  // its root-cause group on this case (root_cause.h)
};

std::string report_text(const Scenario& s, int64_t index, const std::string& gen, const std::vector<Finding>& findings,
                        const Replay& replay) {
  std::ostringstream os;
  const CaseSize size = case_size(s);
  os << "case " << index << " (" << gen << "): " << size.requests << " requests, at most " << size.max_tokens
     << " tokens per request, " << size.history_ops << " history ops, " << size.layers << " layers\n";
  for (const Finding& f : findings)
    os << f.backend << ": " << f.property << ": " << f.message << "\n  fingerprint: " << fingerprint_of(s, f).key() << "\n";
  os << "replay: " << replay_command(replay) << "\n";
  return os.str();
}

// How a finding of `first`'s backend replays from `file`.
Replay replay_of(const CampaignOptions& o, const Finding& first, const Backend* backend, const std::string& file,
                 uint64_t seed) {
  // The case ran its variants with `seed` (run_case); a finding that needs them replays with it.
  const uint64_t variant_seed = first.needs_variants() ? seed : 0;
  const std::vector<std::string> faults = backend != nullptr ? faults_for(*backend, o.faults) : o.faults;
  const std::string replay_backend = backend != nullptr ? first.backend : "all";
  const std::vector<std::string> flags = backend != nullptr ? backend->replay_flags() : std::vector<std::string>{};
  return {file, replay_backend, faults, variant_seed, flags};
}

// The record beside a saved case: its fingerprints and how to replay it.
void write_record(const std::string& case_file, const std::vector<Fingerprint>& fps, const Replay& replay) {
  nlohmann::json record = {{"case", case_file}, {"replay", replay_command(replay)}, {"fingerprints", nlohmann::json::array()}};
  for (const Fingerprint& fp : fps) record["fingerprints"].push_back(fp.to_json());
  write_file_atomic(finding_record_path(case_file), record.dump(2) + "\n");
}

// Saves the case at once (named by the group's property, backend, case and key), then its form
// shrunk while it keeps the same fingerprint key; returns the path of the best saved case.
std::string save_finding(Shared& sh, const Scenario& s, int64_t index, uint64_t seed, const std::string& gen,
                         const KeyGroup& group, const std::vector<Finding>& all, const Backend* backend,
                         double check_seconds) {
  const CampaignOptions& o = sh.options;
  const Finding& first = group.findings.front();
  const std::string key = group.fingerprint.key();
  const std::string base = o.out_dir + "/" + file_safe(first.property + "-" + first.backend) + "-" + std::to_string(index) +
                           "-" + key_tag(key);
  const Replay replay = replay_of(o, first, backend, base + ".json", seed);
  write_file_atomic(base + ".json", to_json(s));
  write_file_atomic(base + ".txt", report_text(s, index, gen, all, replay));
  write_record(base + ".json", {group.fingerprint}, replay);
  // Shrinking spends the campaign's budget too: cut at its end (or a signal), the case stays as
  // saved. Where the deadline cut does not bound its checks (start_rule.h), it starts only with
  // time left for the check it repeats and one attempt (each about as long as the case's own
  // check, `check_seconds`); where it does, a late start costs only work thrown away.
  double budget = o.shrink_seconds;
  if (o.seconds > 0) {
    budget = std::min(budget, o.seconds - std::chrono::duration<double>(Clock::now() - sh.start).count());
    if (!sh.start_rule.cut_at_deadline() && budget < 2 * check_seconds) budget = 0;
  }
  if (!o.shrink || backend == nullptr || budget <= 0 || stopping(o)) return base + ".json";
  const ShrinkTarget target{key, backend, replay.faults, first.needs_variants(), replay.variant_seed, true};
  const ShrinkResult r = shrink(s, target, {budget, 5000, o.stop});
  if (r.finding.property.empty()) return base + ".json";
  Replay min_replay = replay;
  min_replay.file = base + ".min.json";
  write_file_atomic(base + ".min.json", to_json(r.scenario));
  write_file_atomic(base + ".min.txt", report_text(r.scenario, index, gen, {r.finding}, min_replay));
  write_record(base + ".min.json", {fingerprint_of(r.scenario, r.finding)}, min_replay);
  return base + ".min.json";
}

// The line of the index for one group: replayable whether or not its case was saved.
nlohmann::json index_line(const CampaignOptions& o, const KeyGroup& g, int64_t index, const CaseDraw& draw,
                          Profile profile, const std::string& saved, const Backend* backend) {
  const uint64_t seed = draw.seed;
  const Finding& first = g.findings.front();
  std::string replay;
  if (!saved.empty()) {
    replay = replay_command(replay_of(o, first, backend, saved, seed));
  } else {
    const std::string file = "case-" + std::to_string(index) + ".json";
    replay = replay_command(replay_of(o, first, backend, file, seed), gen_command(draw, profile) + " > " + file);
  }
  nlohmann::json line = {{"key", g.fingerprint.key()},
                         {"fingerprint", g.fingerprint.to_json()},
                         {"case_index", index},
                         {"case_seed", seed},
                         {"profile", to_string(profile)},
                         {"count", g.findings.size()},
                         {"message", first.message},
                         {"saved", saved.empty() ? nlohmann::json(nullptr) : nlohmann::json(saved)},
                         {"replay", replay},
                         {"group", g.root.group},
                         {"group_why", g.root.why}};
  if (draw.shape_seed) line["shape_seed"] = *draw.shape_seed;
  return line;
}

const Backend* backend_named(const CampaignOptions& o, const std::string& name) {
  for (const Backend* b : o.backends)
    if (b->name() == name) return b;
  return nullptr;
}

// Checks case `index` and indexes its findings; false when the campaign was stopped while it ran
// (a signal also reaches adapter workers: what the case found then is dropped, not indexed).
bool run_case(Shared& sh, int64_t index) {
  const CampaignOptions& o = sh.options;
  const Profile profile = o.profiles[static_cast<size_t>(index) % o.profiles.size()];
  const CaseDraw draw = draw_case(sh.shapes, index, profile, o.reuse_shapes, o.shape_run);
  const Scenario& s = draw.scenario;
  const uint64_t seed = draw.seed;
  const std::string gen = gen_command(draw, profile);
  const bool metamorphic = o.metamorphic_every > 0 && index % o.metamorphic_every == 0;
  CaseReport report;
  double check_seconds = 0;
  // A stop because the campaign's time was up (backends/common/deadline.h) drops the case.
  const int64_t stops = stops_on_this_thread();
  const auto cut_short = [&] { return stopping(o) || stops_on_this_thread() != stops; };
  try {
    const auto checked_at = Clock::now();
    report = check_all(s, o.backends, {o.faults, metamorphic, seed});
    check_seconds = std::chrono::duration<double>(Clock::now() - checked_at).count();
    sh.start_rule.checked(check_seconds);
  } catch (const std::exception& e) {  // backends' throws are crash findings: this is kvfuzz's own
    if (cut_short()) return false;
    const std::string base = o.out_dir + "/harness-error-" + std::to_string(index);
    const std::string replay = replay_command({base + ".json", "all", o.faults, seed, {}});
    write_file_atomic(base + ".json", to_json(s));
    write_file_atomic(base + ".txt", std::string("harness error (a bug in kvfuzz, not in a backend): ") + e.what() +
                                         "\nreplay: " + replay + "\n");
    // In the index and a record too, so that triage never reads a campaign with one as clean.
    const nlohmann::json fp = {{"key", "harness-error: " + normalize_message(e.what())},
                               {"property", "harness-error"},
                               {"mechanism", normalize_message(e.what())}};
    write_file_atomic(finding_record_path(base + ".json"),
                      nlohmann::json{{"case", base + ".json"}, {"replay", replay}, {"fingerprints", {fp}}}.dump(2) + "\n");
    sh.index.append({{"key", fp["key"]},
                     {"fingerprint", fp},
                     {"case_index", index},
                     {"case_seed", seed},
                     {"profile", to_string(profile)},
                     {"count", 1},
                     {"message", e.what()},
                     {"saved", base + ".json"},
                     {"replay", replay},
                     {"group", fp["key"]},
                     {"group_why", "a harness error: a group of its own"}});
    std::lock_guard<std::mutex> lock(sh.mu);
    if (sh.summary.harness_errors++ == 0) sh.summary.first_harness_error = e.what() + (", case " + base + ".json");
    return true;
  }
  if (cut_short()) return false;
  // Group the case's findings by fingerprint key (in a fixed order: the report's).
  std::vector<KeyGroup> groups;
  for (const Finding& f : report.findings) {
    Fingerprint fp = fingerprint_of(s, f);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const KeyGroup& g) { return g.fingerprint.key() == fp.key(); });
    if (it == groups.end()) groups.push_back({std::move(fp), {f}, {}});
    else it->findings.push_back(f);
  }
  std::vector<Fingerprint> fps;
  for (const KeyGroup& g : groups) fps.push_back(g.fingerprint);
  const std::vector<RootCause> roots = root_causes(fps);
  for (size_t i = 0; i < groups.size(); ++i) groups[i].root = roots[i];
  std::vector<size_t> to_save;
  {
    std::lock_guard<std::mutex> lock(sh.mu);
    CampaignSummary& sum = sh.summary;
    sum.draws += draw.draws;
    for (size_t b = 0; b < o.backends.size(); ++b)
      if (draw.unsupported[b] > 0) sum.draws_unsupported[std::string(o.backends[b]->name())] += draw.unsupported[b];
    if (draw.shape_seed && sh.shapes_used.insert(*draw.shape_seed).second) sum.shapes++;
    if (report.unsupported.size() < o.backends.size() && ++sum.checked == 100)
      sum.first_100_checked_seconds = std::chrono::duration<double>(Clock::now() - sh.start).count();
    sum.coverage.add(s);
    sum.counts.add(s, backends_checked(o.backends, report.unsupported));
    for (const std::string& u : report.unsupported) sum.backend_unsupported[u.substr(0, u.find(": "))]++;
    for (const Backend* b : o.backends) sum.backend_runs[std::string(b->name())] += 1;
    for (const auto& [name, t] : report.variants) {
      VariantTally& total = sum.variants[name];
      total.run += t.run;
      total.invalid += t.invalid;
      total.unsupported += t.unsupported;
    }
    if (!groups.empty()) sum.cases_with_findings++;
    for (size_t i = 0; i < groups.size(); ++i) {
      const std::string key = groups[i].fingerprint.key();
      FindingKind& k = sum.kinds[key];
      if (k.count++ == 0) {
        k.first_case = index;
        k.example = groups[i].findings.front().message;
      }
      if (sh.saved[key]++ < o.max_saved_per_kind) to_save.push_back(i);
      RootGroup& r = sum.root_groups[groups[i].root.group];
      if (r.keys.empty() || r.last_case != index) r.cases++;
      r.last_case = index;
      r.keys.insert(key);
    }
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    const KeyGroup& g = groups[i];
    const Backend* backend = backend_named(o, g.findings.front().backend);
    std::string file;
    if (std::find(to_save.begin(), to_save.end(), i) != to_save.end()) {
      file = save_finding(sh, s, index, seed, gen, g, report.findings, backend, check_seconds);
      std::lock_guard<std::mutex> lock(sh.mu);
      FindingKind& k = sh.summary.kinds[g.fingerprint.key()];
      if (k.first_case == index) k.first_file = file;
    }
    sh.index.append(index_line(o, g, index, draw, profile, file, backend));
  }
  return true;
}

}  // namespace

CampaignSummary run_campaign(const CampaignOptions& o, std::ostream& progress) {
  std::filesystem::create_directories(o.out_dir);
  Shared sh(o);
  const auto start = sh.start;  // one clock for the progress, the summary and the first-100 time
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  // A case starts until the deadline where the deadline cut bounds it, else only when it would
  // end within the budget (start_rule.h).
  auto should_stop = [&] { return stopping(o) || !sh.start_rule.may_start(elapsed()); };
  // --seconds bounds the checks in flight too: at the deadline external adapters refuse every
  // further request and their servers' processes are killed, so each case in flight ends at its
  // next request, or at once on a server (and is dropped), and shrinking, whose budget ends
  // there, stops.
  std::atomic<bool> time_up{false};
  std::mutex deadline_mu;
  std::condition_variable deadline_cv;
  bool workers_joined = false;
  std::thread deadline;
  if (o.seconds > 0) {
    set_deadline_flag(&time_up);
    deadline = std::thread([&] {
      std::unique_lock<std::mutex> lock(deadline_mu);
      if (!deadline_cv.wait_until(lock, start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds)),
                                  [&] { return workers_joined; })) {
        time_up.store(true);
        for (const auto& a : registered_adapters()) a->stop_servers();
      }
    });
  }
  CompileAhead ahead(o, sh.shapes, sh.next);  // warm-ups of the next runs' variants, beside the jobs
  std::vector<std::thread> workers;
  for (int j = 0; j < std::max(1, o.jobs); ++j) {
    workers.emplace_back([&] {
      while (!should_stop()) {  // this shard's k-th case (fuzz/shard.h)
        const int64_t i = o.shard_rule().case_at(sh.next.fetch_add(1));
        if (o.cases > 0 && i >= o.cases) break;
        if (run_case(sh, i)) sh.done.fetch_add(1);
      }
    });
  }
  CampaignRecordWriter record(o);  // DIR/campaign.json, for kvfuzz report
  const std::string shard =
      o.shard_count > 1 ? "shard " + std::to_string(o.shard_index) + "/" + std::to_string(o.shard_count) + " " : "";
  std::thread reporter([&] {
    int64_t last = -1;
    bool told_stop = false;
    while (true) {
      const bool finished = sh.workers_done.load();
      const int64_t done = sh.done.load();
      if (stopping(o) && !told_stop) {
        told_stop = true;
        progress << (o.live_progress ? "\n[" : "[") << shard << std::fixed << std::setprecision(1) << elapsed()
                 << "s] stopping: no new case starts, the cases being checked are dropped, shrinking is cut short (its "
                    "case stays saved)\n"
                 << std::flush;
      }
      if (done != last || finished) {
        std::lock_guard<std::mutex> lock(sh.mu);
        const double t = elapsed();
        progress << (o.live_progress ? "\r[" : "[") << shard << std::fixed << std::setprecision(1) << t << "s] " << done
                 << " cases (" << std::setprecision(1) << (t > 0 ? static_cast<double>(done) / t : 0.0)
                 << "/s), findings " << sh.summary.findings() << " (" << sh.summary.kinds.size() << " kinds), "
                 << sh.summary.coverage.line() << (o.live_progress ? "   " : "\n") << std::flush;
        last = done;
        record.update(sh.summary, done, t);
      }
      if (finished) break;
      const auto quiet = [&] { return !sh.workers_done.load() && (told_stop || !stopping(o)); };
      for (int t = 0; t < (o.live_progress ? 1 : 20) && quiet(); ++t)
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  });
  for (std::thread& w : workers) w.join();
  ahead.finish();
  if (deadline.joinable()) {
    {
      std::lock_guard<std::mutex> lock(deadline_mu);
      workers_joined = true;
    }
    deadline_cv.notify_all();
    deadline.join();
    set_deadline_flag(nullptr);
  }
  sh.workers_done.store(true);
  reporter.join();
  if (o.live_progress) progress << "\n";
  sh.summary.cases = sh.done.load();
  sh.summary.seconds = elapsed();
  sh.summary.stopped = stopping(o);
  sh.summary.compile_ahead = ahead.on();
  record.finish(sh.summary);
  return sh.summary;
}

std::optional<std::pair<int, int>> parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  const auto number = [](const std::string& d) -> std::optional<int> {
    if (d.empty() || d.size() > 6 || d.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return std::stoi(d);
  };
  if (slash == std::string::npos) return std::nullopt;
  const auto i = number(text.substr(0, slash)), n = number(text.substr(slash + 1));
  if (!i || !n || *n < 1 || *n > 100000 || *i >= *n) return std::nullopt;
  return std::pair{*i, *n};
}

void print_summary(const CampaignSummary& s, std::ostream& out) {
  // Pair backends ("planner:executor") can be long: size the name columns to what is printed.
  int name_width = 18, kind_width = 32;
  for (const auto& [name, n] : s.backend_runs) name_width = std::max(name_width, static_cast<int>(name.size()) + 2);
  for (const auto& [sig, k] : s.kinds) kind_width = std::max(kind_width, static_cast<int>(sig.size()) + 2);
  out << "campaign: " << s.cases << " cases in " << std::fixed << std::setprecision(1) << s.seconds << " s ("
      << (s.seconds > 0 ? static_cast<double>(s.cases) / s.seconds : 0.0) << " cases/s)\n";
  out << "coverage: " << s.coverage.line() << "\n";
  out << std::left << std::setw(name_width) << "backend" << std::right << std::setw(10) << "checked" << std::setw(13) << "unsupported"
      << "\n";
  for (const auto& [name, n] : s.backend_runs) {
    const auto it = s.backend_unsupported.find(name);
    const int64_t unsupported = it == s.backend_unsupported.end() ? 0 : it->second;
    out << std::left << std::setw(name_width) << name << std::right << std::setw(10) << n - unsupported << std::setw(13)
        << unsupported << "\n";
  }
  if (!s.draws_unsupported.empty() && s.draws > 0) {
    out << "drawn within support: " << s.draws << " draws for " << s.cases
        << " cases; outside each backend's declared support:";
    for (const auto& [name, n] : s.draws_unsupported)
      out << " " << name << " " << std::setprecision(0) << 100.0 * static_cast<double>(n) / static_cast<double>(s.draws)
          << "%";
    out << std::setprecision(1) << "\n";
  }
  if (s.first_100_checked_seconds >= 0)
    out << "first 100 checked cases: " << std::setprecision(1) << s.first_100_checked_seconds << " s after the start\n";
  if (s.shapes > 0)
    out << "shapes: " << s.shapes << " (page size, model, dtype), each reused by " << std::setprecision(1)
        << static_cast<double>(s.cases) / static_cast<double>(s.shapes) << " cases on average\n";
  if (!s.variants.empty()) {
    out << std::left << std::setw(name_width) << "variant" << std::right << std::setw(10) << "run" << std::setw(13) << "invalid"
        << std::setw(13) << "unsupported"
        << "   (dropped variants: not compared)\n";
    for (const auto& [name, t] : s.variants)
      out << std::left << std::setw(name_width) << name << std::right << std::setw(10) << t.run << std::setw(13) << t.invalid
          << std::setw(13) << t.unsupported << "\n";
  }
  if (s.harness_errors > 0)
    out << "harness errors: " << s.harness_errors << " (bugs in kvfuzz, not findings); first: " << s.first_harness_error
        << "\n";
  if (s.kinds.empty()) {
    out << "no findings\n";
    return;
  }
  // Root-cause groups first (root_cause.h), each a "group" line, then its fingerprint keys.
  out << s.kinds.size() << " fingerprint keys in " << s.root_groups.size() << " root-cause group(s)\n";
  out << std::left << std::setw(kind_width) << "finding (fingerprint key)" << std::right << std::setw(8) << "cases"
      << std::setw(12) << "first case"
      << "  saved as\n";
  for (const auto& [group, r] : s.root_groups) {
    out << "group " << group << "  (" << r.cases << " case" << (r.cases == 1 ? "" : "s") << ")\n";
    for (const std::string& sig : r.keys) {
      const FindingKind& k = s.kinds.at(sig);
      out << std::left << std::setw(kind_width) << sig << std::right << std::setw(8) << k.count << std::setw(12)
          << k.first_case << "  " << k.first_file << "\n";
    }
  }
}

}  // namespace kvfuzz
