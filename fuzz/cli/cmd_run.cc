// kvfuzz run: a fuzz campaign over generated cases; findings shrunk and saved under --out.
//
//   kvfuzz run --seconds 600 --backend all --jobs 2 --out findings
//   kvfuzz run --cases 5000 --seed 7
#include <unistd.h>

#include <csignal>
#include <iomanip>
#include <iostream>
#include <optional>
#include <thread>

#include "backends/external/adapter.h"
#include "backends/registry.h"
#include "fuzz/campaign.h"
#include "fuzz/cli/commands.h"
#include "fuzz/cli/options.h"
#include "reference/case_error.h"
#include "reference/oracle.h"

namespace kvfuzz::cli {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};
// The first SIGINT/SIGTERM ends the campaign cleanly (a scheduler's time limit sends SIGTERM, then
// SIGKILL after a grace period); a second one ends the process at once (every written finding is
// already whole: files are written atomically, index lines in one write).
void on_signal(int sig) {
  if (g_stop.exchange(true)) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_signal.store(sig);
}

// Where an adapter's requests spent their time (ci/gpu_table.py reads this line): its function on
// warm variants and on first calls, its own code around the function, and the exchange: kvfuzz
// writing the request, the adapter reading it, writing its outputs, kvfuzz reading them, and the
// pipe (round trip minus the adapter's handling). An adapter that reports no "timing" has its
// own code counted in the pipe.
void print_adapter_time(const std::string& name, const AdapterStats& st, std::ostream& out) {
  const auto s = [](const std::atomic<int64_t>& ns) { return static_cast<double>(ns.load()) * 1e-9; };
  const double function = s(st.function_nanoseconds), first = s(st.first_call_nanoseconds);
  const double serve = s(st.serve_nanoseconds), read = s(st.adapter_read_nanoseconds);
  const double write = s(st.adapter_write_nanoseconds);
  const double own = serve > 0 ? serve - function - read - write : 0.0;
  const double queue = s(st.queue_nanoseconds);
  const double pipe = s(st.round_trip_nanoseconds) - serve - queue;
  const double exchange = s(st.kvfuzz_write_nanoseconds) + read + write + s(st.kvfuzz_read_nanoseconds) + pipe;
  out << std::fixed << std::setprecision(2) << "adapter " << name << " time: kernel " << function - first
      << " s, first calls of a variant " << first << " s, adapter code " << own << " s, exchange " << exchange
      << " s (kvfuzz writes " << s(st.kvfuzz_write_nanoseconds) << ", adapter reads " << read << ", adapter writes "
      << write << ", kvfuzz reads " << s(st.kvfuzz_read_nanoseconds) << ", pipe " << pipe << "), server queue " << queue
      << " s\n";
}

}  // namespace

void add_run(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("run", "Run a fuzz campaign (exit 1 on findings)");
  static double seconds = 0;
  static int64_t cases = 0;
  static std::string backend = "all", out = "findings";
  static uint64_t seed = 1;
  static int jobs = 0;
  static std::vector<std::string> faults, profiles;
  static int metamorphic_every = 8;
  static double shrink_seconds = 30;
  static bool no_shrink = false;
  static int max_saved = 3;
  static int reuse_shapes = 0, shape_run = 1;
  static std::optional<uint64_t> shape_seed;
  static bool compile_ahead = false;
  static std::string shard;
  cmd->add_option("--seconds", seconds, "Stop after this many seconds")->check(non_negative());
  cmd->add_option("--cases", cases, "Stop after this many cases")->check(non_negative());
  cmd->add_option("--backend", backend, "Backend name, or all")->capture_default_str();
  static AdapterOptions adapters;
  add_adapter_options(cmd, adapters);
  cmd->add_option("--seed", seed,
                  "Campaign seed: case i is generate(hash(seed, i)), drawn again while no backend supports it")
      ->check(seed_check())
      ->capture_default_str();
  // Up to 1024: with executor servers a job mostly waits for its answer, and the cases waiting at
  // once are what a batch gathers from (docs/gpu.md "When a batch goes").
  cmd->add_option("--jobs", jobs, "Worker threads (0: one per core)")->check(CLI::Range(0, 1024));
  cmd->add_option("--out", out, "Folder for findings")->capture_default_str();
  cmd->add_option("--profile", profiles, "Size profiles to rotate through (default tiny small small medium)")
      ->check(profile_check());
  cmd->add_option("--fault", faults, "Switch on a named planner fault");
  cmd->add_option("--metamorphic-every", metamorphic_every, "Run the metamorphic variants on every n-th case (0: never)")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  cmd->add_option("--shrink-seconds", shrink_seconds, "Time to shrink each saved finding")->capture_default_str();
  cmd->add_flag("--no-shrink", no_shrink, "Save findings without shrinking them");
  cmd->add_option(
         "--reuse-shapes", reuse_shapes,
         "Each shape (page size, model, dtype: what a real kernel compiles a variant for) serves about N cases, "
         "a new one every N cases, so JIT compiles stay few (0: every case its own shape)")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  cmd->add_option("--shape-run", shape_run,
                  "With --reuse-shapes: runs of N consecutive cases share one shape, so cases of a shape are checked at "
                  "once and an executor server batches them (1: each case picks its own)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--shape-seed", shape_seed,
                  "Seed of the shapes --reuse-shapes draws (default: --seed); keep it while --seed changes to draw new "
                  "cases on shapes whose kernels earlier campaigns compiled")
      ->check(seed_check());
  cmd->add_flag("--compile-ahead", compile_ahead,
                "With --shape-run and --adapter-servers: send the servers warm-ups of the next runs' kernel variants, "
                "so each builds them while it serves the current run (the same cases and findings; off by default "
                "until measured on a GPU: docs/gpu.md)");
  cmd->add_option("--max-saved", max_saved, "Cases saved (and shrunk) per fingerprint key; the index (OUT/index.jsonl) lists every finding")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--shard", shard,
                  "Run only part I of N of the campaign (0 <= I < N): blocks of one case per --profile, block b "
                  "where b mod N == I, the same on any machine; `kvfuzz merge` joins the N parts' folders");
  cmd->callback([&exit_code] {
    const auto started = std::chrono::steady_clock::now();  // --seconds counts the adapters' start too
    const auto part = shard.empty() ? std::optional<std::pair<int, int>>({0, 1}) : parse_shard(shard);
    if (!part)
      throw InvalidCase("--shard " + shard + ": expected I/N with whole numbers 0 <= I < N (e.g. 0/4 ... 3/4)");
    if (seconds <= 0 && cases <= 0) seconds = 60;
    CampaignOptions o;
    o.start = started;
    o.seconds = seconds;
    o.cases = cases;
    register_adapters(adapters);
    o.backends = select_backends(backend);
    check_faults(faults, o.backends);
    o.faults = faults;
    o.seed = seed;
    o.jobs = jobs > 0 ? jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    o.out_dir = out;
    if (!profiles.empty()) {
      o.profiles.clear();
      for (const std::string& p : profiles) o.profiles.push_back(*parse_profile(p));
    }
    o.metamorphic_every = metamorphic_every;
    o.shrink = !no_shrink;
    o.shrink_seconds = shrink_seconds;
    o.max_saved_per_kind = max_saved;
    o.reuse_shapes = reuse_shapes;
    o.shape_run = shape_run;
    o.shape_seed = shape_seed;
    o.compile_ahead = compile_ahead;
    o.live_progress = isatty(STDERR_FILENO) != 0;
    o.shard_index = part->first;
    o.shard_count = part->second;
    o.stop = &g_stop;
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::cerr << "kvfuzz run: seed " << seed << ", " << o.backends.size() << " backend(s), " << o.jobs << " job(s), ";
    if (cases > 0) std::cerr << cases << " cases";
    else std::cerr << seconds << " s";
    if (o.shard_count > 1)
      std::cerr << ", shard " << shard << " (blocks of " << o.shard_rule().block << " case(s), block b with b mod "
                << o.shard_count << " = " << o.shard_index << ")";
    std::cerr << ", findings in " << out << "/\n";
    const CampaignSummary s = run_campaign(o, std::cerr);
    if (s.stopped) {
      const int sig = g_signal.load();
      std::cerr << "kvfuzz run: interrupted by "
                << (sig == SIGTERM  ? "SIGTERM"
                    : sig == SIGINT ? "SIGINT"
                                    : "a signal")
                << " after " << std::fixed << std::setprecision(1) << s.seconds << " s and " << s.cases
                << " cases; every finding indexed is in " << out << "/index.jsonl (saved cases whole, some unshrunk), "
                << "and the folder merges (kvfuzz merge)\n";
    }
    print_summary(s, std::cout);
    for (const auto& a : registered_adapters()) {
      const AdapterStats& st = a->stats();
      std::cout << "adapter " << a->spec().name << ": " << st.requests << " requests, " << st.crashes << " crashes, "
                << st.hangs << " hangs, " << st.errors << " errors reported, " << st.unsupported
                << " answered unsupported; " << st.restarts
                << " workers replaced, the campaign went on; " << std::fixed << std::setprecision(1)
                << static_cast<double>(st.function_nanoseconds.load()) * 1e-9 << " s inside the adapter's function\n";
      print_adapter_time(a->spec().name, st, std::cout);
      if (const AdapterLayout& l = a->layout(); l.servers > 0) {
        std::cout << "adapter " << a->spec().name << " servers: " << l.servers << " (";
        for (int i = 0; i < l.servers; ++i)
          std::cout << (i ? ", " : "")
                    << (l.gpus.empty() ? "no GPU" : "GPU " + l.gpus[static_cast<size_t>(i) % l.gpus.size()]);
        std::cout << "), " << a->server_restarts() << " restarts; " << st.reruns
                  << " requests re-run alone after a failure on a shared server, " << st.reruns_failed
                  << " of them failed alone too (findings)\n";
        if (l.lanes > 1)
          std::cout << "adapter " << a->spec().name << " lanes: " << l.lanes << " offered, " << a->server_lanes()
                    << " declared (requests each server works on at once)\n";
        if (s.compile_ahead)
          std::cout << "adapter " << a->spec().name << " warm-ups: " << st.warm_ups << " sent, " << st.warm_ups_failed
                    << " failed (compile ahead: the next runs' kernel variants, answers discarded, never findings), "
                    << std::setprecision(2) << static_cast<double>(st.warm_up_nanoseconds.load()) * 1e-9
                    << " s from sending to answer\n";
        if (a->batches())
          std::cout << "adapter " << a->spec().name << " batches: " << st.batches << " requests carried "
                    << st.batched_cases << " cases, " << st.batches_failed << " failed (their cases re-run alone); "
                    << st.batched_runs << " kernel runs (value sets) in all; openers waited for a server "
                    << st.opener_waits << " times, " << st.opener_waits_ran_out
                    << " of them until the 100 ms net (no release woke them)\n";
      }
    }
    std::cout << std::fixed << std::setprecision(2) << "oracle: " << oracle_seconds_spent() << " s in run_oracle\n";
    exit_code = s.harness_errors > 0 ? 3 : s.findings() > 0 ? 1 : 0;
  });
}

}  // namespace kvfuzz::cli
