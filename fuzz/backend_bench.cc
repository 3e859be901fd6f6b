#include "fuzz/backend_bench.h"

#include <chrono>
#include <iomanip>
#include <ostream>

#include "fuzz/campaign.h"
#include "properties/check.h"

namespace kvfuzz {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

BackendBench run_backend_bench(const std::vector<const Backend*>& backends, Profile profile, int64_t cases, uint64_t seed) {
  BackendBench b;
  b.cases = cases;
  for (const Backend* be : backends) b.rates.push_back({std::string(be->name())});
  for (int64_t i = 0; i < cases; ++i) {
    auto t = Clock::now();
    const CaseContext ctx(generate(campaign_case_seed(seed, i), profile));
    b.generate_seconds += since(t);
    t = Clock::now();
    ctx.oracle();
    b.oracle_seconds += since(t);
    for (size_t k = 0; k < backends.size(); ++k) {
      t = Clock::now();
      const CheckResult r = check_case(ctx, *backends[k]);
      const double dt = since(t);
      if (!r.support.ok) {
        ++b.rates[k].unsupported;
        continue;
      }
      ++b.rates[k].cases;
      b.rates[k].seconds += dt;
    }
  }
  return b;
}

void print_backend_bench(const BackendBench& b, std::ostream& out) {
  out << std::fixed << std::setprecision(1);
  out << b.cases << " generated cases: generation and preparation " << b.cases / b.generate_seconds
      << " cases/s, oracle " << b.cases / b.oracle_seconds << " cases/s (one thread)\n";
  out << std::left << std::setw(18) << "backend" << std::right << std::setw(10) << "checked" << std::setw(13)
      << "unsupported" << std::setw(14) << "cases/s" << "   (plan + run + every single-case property)\n";
  for (const BackendRate& r : b.rates)
    out << std::left << std::setw(18) << r.name << std::right << std::setw(10) << r.cases << std::setw(13) << r.unsupported
        << std::setw(14) << (r.seconds > 0 ? static_cast<double>(r.cases) / r.seconds : 0.0) << "\n";
}

}  // namespace kvfuzz
