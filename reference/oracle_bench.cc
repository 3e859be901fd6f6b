// The oracle bench (oracle_bench.h): machine peaks, then the oracle's phases on two shapes.
#include "reference/oracle_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <omp.h>

#include "reference/oracle_buffer.h"
#include "reference/oracle_dispatch.h"
#include "reference/oracle_kernel.h"
#include "reference/oracle_materialise.h"
#include "reference/oracle_phases.h"
#include "reference/oracle_plan.h"

namespace kvfuzz {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <typename... Args>
std::string format(const char* fmt, Args... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

// The CPU's model name from /proc/cpuinfo, or "unknown CPU".
std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
      return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// ------------------------------------------------------------------------------- machine --

// The machine's peaks: the best seen over the whole run, since a shared machine's neighbours
// can slow any single measurement.
struct Machine {
  int threads = 1;
  double fma_flops = 0;   // fp64 FLOP/s of register-resident FMA chains, all threads
  double read_bytes = 0;  // bytes/s of a streaming read, all threads
  AlignedBuffer<double> stream;  // [kStreamDoubles]: the array the read streams over

  static constexpr int64_t kStreamDoubles = int64_t{1} << 26;  // 512 MiB

  // One timed pass of independent FMA chains on every thread.
  void measure_fma() {
    const OracleKernels& k = oracle_kernels();
    constexpr int64_t kIters = 20'000'000;
    double flops = 0, sink = 0;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : flops, sink)
    flops += k.fma_chains(kIters, &sink);
    const double t = seconds_since(t0);
    fma_flops = std::max(fma_flops, flops / t);
    if (sink == 0.125) std::puts("");
  }

  // One timed pass summing the stream array on every thread.
  void measure_read() {
    if (stream.size() == 0) {
      stream = AlignedBuffer<double>(static_cast<size_t>(kStreamDoubles));
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t i = 0; i < kStreamDoubles; ++i) stream[static_cast<size_t>(i)] = static_cast<double>(i & 7);
    }
    const OracleKernels& k = oracle_kernels();
    constexpr int64_t kSlices = kStreamDoubles / 64;  // stream_sum's unit
    double sink = 0;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
      const int64_t tid = omp_get_thread_num(), n = omp_get_num_threads();
      const int64_t begin = kSlices * tid / n * 64, end = kSlices * (tid + 1) / n * 64;
      sink += k.stream_sum(stream.data() + begin, end - begin);
    }
    const double t = seconds_since(t0);
    read_bytes = std::max(read_bytes, static_cast<double>(kStreamDoubles) * sizeof(double) / t);
    if (sink == 0.125) std::puts("");
  }
};

// ---------------------------------------------------------------------------------- shapes --

Scenario bench_scenario(int32_t q_heads, int32_t kv_heads, int32_t requests, int32_t cached, int32_t new_tokens) {
  Scenario s;
  s.model.q_heads = q_heads;
  s.model.kv_heads = kv_heads;
  s.model.head_dim = 128;
  s.model.v_head_dim = 128;
  s.model.sm_scale = 1.0 / std::sqrt(128.0);
  s.model.layers = {Layer{LayerKind::full, 0, 0}};
  s.values.seed = 2024;
  s.batch.mode = new_tokens == 1 ? Mode::decode : Mode::extend;
  for (int32_t r = 1; r <= requests; ++r) {
    s.history.push_back(Op{OpKind::admit, r, 0, {}, {}});
    if (cached > 0) s.history.push_back(Op{OpKind::extend, r, cached, {}, {}});
    s.batch.entries.push_back(BatchEntry{r, new_tokens, {}});
  }
  return s;
}

struct ShapeRun {
  double flops = 0;          // 2 (head_dim + v_head_dim) per visible (query, key, q head)
  double kv_bytes = 0;       // K and V bytes the kernel reads: each unit's key hull, once
  double kernel_s = 0;       // attention on materialised arrays: best repetition, summed over chunks
  double materialise_s = 0;  // reading values into those arrays
  double e2e_s = 0;          // run_oracle, all phases: best run
  OracleTimes e2e;           // that run's phases
};

// Runs the oracle's phases on `s` by hand (the kernel `reps` times on the same materialised
// arrays, calling `between` before each), then run_oracle end to end, best of `e2e_reps` runs.
template <typename Between>
ShapeRun run_shape(const Scenario& s, int threads, int reps, int e2e_reps, Between between) {
  ShapeRun run;
  const LogicalBatch lb = derive_logical(s);
  const ValueSource values(s);
  const OracleShape shape = oracle_shape(s.model);
  std::vector<double> out(static_cast<size_t>(lb.q_indptr.back()) * shape.q_heads * shape.v_head_dim);
  std::vector<double> lse(static_cast<size_t>(lb.q_indptr.back()) * shape.q_heads);
  std::vector<double> abs_out(out.size()), qk_norm(lse.size());
  for (int32_t layer = 0; layer < static_cast<int32_t>(s.model.layers.size()); ++layer) {
    const std::vector<RowPlan> rows = plan_rows(s.model.layers[static_cast<size_t>(layer)], lb);
    for (const RowPlan& r : rows)
      run.flops += 2.0 * static_cast<double>(r.visible_pairs) * shape.q_heads * (shape.head_dim + shape.v_head_dim);
    for (auto [begin, end] : chunk_rows(rows, shape, kMaterialiseBudgetFloats)) {
      const std::span<const RowPlan> chunk(rows.data() + begin, end - begin);
      const std::vector<WorkUnit> units = plan_units(chunk, shape);
      for (const WorkUnit& u : units)
        run.kv_bytes += 4.0 * (u.col_hi - u.col_lo) * (shape.head_dim + shape.v_head_dim);
      auto t0 = std::chrono::steady_clock::now();
      Materialised m;
      materialise(values, layer, lb, chunk, units, shape, threads, KvStorage::store_all, m);
      run.materialise_s += seconds_since(t0);
      double best = 1e300;
      for (int rep = 0; rep < reps; ++rep) {
        between();
        t0 = std::chrono::steady_clock::now();
        attend(units, chunk, lb, m, {out.data(), lse.data(), abs_out.data(), qk_norm.data()}, threads);
        best = std::min(best, seconds_since(t0));
      }
      run.kernel_s += best;
    }
  }
  run.e2e_s = 1e300;
  for (int rep = 0; rep < e2e_reps; ++rep) {
    OracleTimes t;
    const auto t0 = std::chrono::steady_clock::now();
    run_oracle_timed(s, lb, values, threads, &t);
    const double e2e = seconds_since(t0);
    if (e2e < run.e2e_s) run.e2e_s = e2e, run.e2e = t;
  }
  return run;
}

std::string phases(const ShapeRun& r) {
  return format("(setup %.3f s, materialise %.3f s, kernel %.3f s)", r.e2e.setup_s, r.e2e.materialise_s,
                r.e2e.kernel_s);
}

const char* verdict(double ratio, double target) { return ratio >= target ? "met" : "MISSED"; }

}  // namespace

int run_oracle_bench(std::ostream& out, int threads) {
  Machine mc;
  mc.threads = threads > 0 ? threads : omp_get_max_threads();
  out << "kvfuzz oracle bench\n"
      << "machine: " << cpu_name() << ", " << mc.threads << " OpenMP threads\n"
      << "oracle kernels: " << oracle_kernels().name << " [" << isa_name(oracle_kernels().isa) << "; this CPU runs "
      << runnable_isa_names() << "; chosen at run time, KVFUZZ_ORACLE_ISA or --isa to force]\n"
      << "the oracle computes in fp64 with fused multiply-adds (no fast-math)\n"
      << "FLOPs: 2 (head_dim + v_head_dim) per visible (query, key, q head). Kernel phase: attention on\n"
      << "K/V already materialised as float; end to end: run_oracle, which also reads every value from\n"
      << "the value source (a 32-bit hash per element; K/V read once are generated inside the kernel,\n"
      << "block by block, so its kernel time includes them). Peaks: best seen during the whole run;\n"
      << "times: best repetition (kernel phase: of 2 prefill, 15 decode; decode end to end: of 5).\n"
      << std::flush;
  for (int i = 0; i < 3; ++i) mc.measure_fma();
  for (int i = 0; i < 3; ++i) mc.measure_read();

  constexpr int32_t kPrefillTokens = 4096;
  const ShapeRun prefill =
      run_shape(bench_scenario(32, 8, 1, 0, kPrefillTokens), mc.threads, 2, 1, [&] { mc.measure_fma(); });
  constexpr int32_t kDecodeRequests = 8, kDecodeCached = 1900;
  const ShapeRun decode = run_shape(bench_scenario(32, 32, kDecodeRequests, kDecodeCached, 1), mc.threads, 15, 5,
                                    [&] { mc.measure_read(); });
  mc.measure_fma();

  out << format("\nfp64 FMA peak          %8.1f GFLOP/s  (register-resident FMA chains on every thread)\n",
                mc.fma_flops / 1e9);
  out << format("memory read bandwidth  %8.1f GB/s     (streaming sum over 512 MiB)\n", mc.read_bytes / 1e9);

  const double prefill_rate = prefill.flops / prefill.kernel_s;
  out << "\nprefill: 1 request extending " << kPrefillTokens
      << " tokens, 32 q heads / 8 kv heads, head_dim 128, full causal\n";
  out << format("  work                 %8.1f GFLOP\n", prefill.flops / 1e9);
  out << format("  kernel phase         %8.3f s  %8.1f GFLOP/s = %5.1f%% of fp64 peak", prefill.kernel_s,
                prefill_rate / 1e9, 100 * prefill_rate / mc.fma_flops)
      << "   [target >= 30%: " << verdict(prefill_rate / mc.fma_flops, 0.30) << "]\n";
  out << format("  materialise phase    %8.3f s\n", prefill.materialise_s);
  out << format("  end to end           %8.3f s  %8.1f GFLOP/s = %5.1f%% of fp64 peak  ", prefill.e2e_s,
                prefill.flops / prefill.e2e_s / 1e9, 100 * prefill.flops / prefill.e2e_s / mc.fma_flops)
      << phases(prefill) << "\n";

  const double decode_rate = decode.kv_bytes / decode.kernel_s;
  out << "\ndecode: " << kDecodeRequests << " requests x " << kDecodeCached
      << " cached tokens, 1 new token each, MHA 32 heads, head_dim 128, full causal\n";
  out << format("  K/V read by kernel   %8.1f MB (%.1f x the 32 MB L3), %.2f GFLOP\n", decode.kv_bytes / 1e6,
                decode.kv_bytes / 32e6, decode.flops / 1e9);
  out << format("  kernel phase         %8.4f s  %8.1f GB/s = %5.1f%% of read bandwidth", decode.kernel_s,
                decode_rate / 1e9, 100 * decode_rate / mc.read_bytes)
      << "   [target >= 50%: " << verdict(decode_rate / mc.read_bytes, 0.50) << "]\n";
  out << format("                                   %8.1f GFLOP/s\n", decode.flops / decode.kernel_s / 1e9);
  out << format("  materialise phase    %8.3f s\n", decode.materialise_s);
  const double decode_e2e_rate = decode.kv_bytes / decode.e2e_s;
  out << format("  end to end           %8.4f s  %8.1f GB/s = %5.1f%% of read bandwidth", decode.e2e_s,
                decode_e2e_rate / 1e9, 100 * decode_e2e_rate / mc.read_bytes)
      << "   [target >= 50%: " << verdict(decode_e2e_rate / mc.read_bytes, 0.50) << "]\n";
  out << format("                                   %8.1f GFLOP/s  ", decode.flops / decode.e2e_s / 1e9)
      << phases(decode) << "\n";
  return 0;
}

}  // namespace kvfuzz
