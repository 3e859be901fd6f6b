#include "fuzz/adapter_bench.h"

#include <chrono>
#include <iomanip>
#include <ostream>

#include "backends/contract/families.h"
#include "properties/case_context.h"

namespace kvfuzz {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

AdapterBench run_adapter_bench(const PairBackend& pair, Profile profile, int64_t cases, uint64_t seed) {
  AdapterBench b;
  b.backend = std::string(pair.name());
  const Backend& builtin = find_family(pair.family())->executor();
  b.builtin = std::string(builtin.name());
  const AdapterStats& stats = pair.external_executor()->stats();
  for (int64_t i = 0; i < cases; ++i) {
    const CaseContext ctx(generate(hash_words(seed, static_cast<uint64_t>(i), 0x62656e63), profile));
    ++b.cases;
    if (!runnable(pair, ctx.scenario()).ok) continue;
    const Scenario& s = ctx.scenario();
    const Prepared& p = ctx.prepared();
    std::unique_ptr<Plan> plan = pair.plan({s, p.cache, p.batch, {}});
    KvPools pools(s, p.cache, value_fn(ctx.values()), finite_poison(s.values.dtype));
    RunOutput out(s, p.batch);
    const int64_t before = stats.function_nanoseconds.load();
    double t = now();
    pair.run(*plan, {s, p.cache, p.batch, pools, ctx.tensors()}, out);
    b.worker_seconds += now() - t;
    b.function_seconds += static_cast<double>(stats.function_nanoseconds.load() - before) * 1e-9;
    KvPools own_pools(s, p.cache, ctx.values());
    RunOutput own(s, p.batch);
    t = now();
    builtin.run(*plan, {s, p.cache, p.batch, own_pools, ctx.tensors()}, own);
    b.builtin_seconds += now() - t;
    ++b.supported;
  }
  return b;
}

void print_adapter_bench(const AdapterBench& b, std::ostream& out) {
  auto rate = [&](double seconds) { return seconds > 0 ? static_cast<double>(b.supported) / seconds : 0.0; };
  const double ratio = b.worker_seconds > 0 ? b.function_seconds / b.worker_seconds : 0.0;
  out << std::fixed << std::setprecision(1);
  out << b.backend << ": " << b.supported << " of " << b.cases << " cases supported, main value set only\n";
  out << "  through the worker          " << std::setw(9) << rate(b.worker_seconds) << " cases/s  ("
      << std::setprecision(3) << 1e3 * b.worker_seconds / std::max<int64_t>(1, b.supported) << " ms per case)\n"
      << std::setprecision(1);
  out << "  the executor in its process " << std::setw(9) << rate(b.function_seconds) << " cases/s  (its own time, same cases, same run)\n";
  out << "  worker / in process         " << std::setw(8) << 100.0 * ratio << " %  [target >= 50%: "
      << (ratio >= 0.5 ? "met" : "not met") << "]\n";
  out << "  kvfuzz's " << b.builtin << " executor in process: " << rate(b.builtin_seconds) << " cases/s\n";
}

}  // namespace kvfuzz
