// The choice of the oracle's ISA at run time (oracle_dispatch.h).
#include "reference/oracle_dispatch.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace kvfuzz {

// Each defined by oracle_isa_kernels.cc compiled for that ISA (reference/CMakeLists.txt).
namespace isa_portable {
const OracleKernels& kernels();
}
#if defined(KVFUZZ_ORACLE_X86)
namespace isa_avx2 {
const OracleKernels& kernels();
}
namespace isa_avx512 {
const OracleKernels& kernels();
}
#endif

namespace {

const OracleKernels& kernels_of(Isa isa) {
#if defined(KVFUZZ_ORACLE_X86)
  if (isa == Isa::avx512) return isa_avx512::kernels();
  if (isa == Isa::avx2) return isa_avx2::kernels();
#endif
  (void)isa;
  return isa_portable::kernels();
}

const OracleKernels* from_environment() {
  const char* env = std::getenv("KVFUZZ_ORACLE_ISA");
  if (env == nullptr || *env == '\0') return &kernels_of(runnable_isas().back());
  const std::optional<Isa> isa = parse_isa(env);
  if (!isa || !cpu_runs(*isa)) {
    std::fprintf(stderr, "KVFUZZ_ORACLE_ISA=%s: %s; this CPU runs: %s\n", env,
                 isa ? "this CPU cannot run it" : "no such ISA (portable, avx2, avx512)", runnable_isa_names().c_str());
    std::exit(2);
  }
  return &kernels_of(*isa);
}

std::atomic<const OracleKernels*> forced{nullptr};

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::portable:
      return "portable";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "?";
}

std::optional<Isa> parse_isa(std::string_view name) {
  for (Isa isa : {Isa::portable, Isa::avx2, Isa::avx512})
    if (name == isa_name(isa)) return isa;
  return std::nullopt;
}

bool cpu_runs(Isa isa) {
#if defined(KVFUZZ_ORACLE_X86)
  __builtin_cpu_init();  // idempotent; needed should this run before libgcc's constructor
#endif
  switch (isa) {
    case Isa::portable:
      return true;
#if defined(KVFUZZ_ORACLE_X86)
    case Isa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::avx512:
      return __builtin_cpu_supports("avx512f") && cpu_runs(Isa::avx2);
#else
    default:
      return false;
#endif
  }
  return false;
}

std::vector<Isa> runnable_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::portable, Isa::avx2, Isa::avx512})
    if (cpu_runs(isa)) out.push_back(isa);
  return out;
}

std::string runnable_isa_names() {
  std::string out;
  for (Isa isa : runnable_isas()) out += (out.empty() ? "" : ", ") + std::string(isa_name(isa));
  return out;
}

const OracleKernels& oracle_kernels() {
  if (const OracleKernels* k = forced.load(std::memory_order_acquire)) return *k;
  static const OracleKernels* const chosen = from_environment();
  return *chosen;
}

void use_oracle_isa(Isa isa) {
  if (!cpu_runs(isa)) {
    std::fprintf(stderr, "use_oracle_isa(%s): this CPU cannot run it; it runs: %s\n",
                 std::string(isa_name(isa)).c_str(), runnable_isa_names().c_str());
    std::exit(2);
  }
  forced.store(&kernels_of(isa), std::memory_order_release);
}

}  // namespace kvfuzz
