// Which instruction set the oracle's kernels run on, chosen at run time.
//
// Where it sits: between the oracle's drivers (oracle_kernel.cc's attend, oracle_bench.cc) and
// its per-ISA kernels (oracle_isa_kernels.cc, compiled once per ISA in every build, portable or
// -march=native: reference/CMakeLists.txt). The first use picks the best ISA this CPU runs, or the
// one the environment variable KVFUZZ_ORACLE_ISA names (portable, avx2, avx512); tests and
// `kvfuzz bench oracle --isa` force one with use_oracle_isa.
//
// Every ISA gives the same bits: each element is computed by the same sequence of IEEE operations
// (explicit fused multiply-adds, no contraction), and every sum across lanes runs over
// kOracleLanes lanes folded as one tree, whatever the vector width (oracle_simd.h).
//
//   const OracleKernels& k = oracle_kernels();   // k.name: "AVX-512 (8 doubles per vector)"
//   k.attend_unit(unit, row_plan, r, materialised, query_base, layer_out, scratch);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvfuzz {

struct LayerOut;
struct Materialised;
struct OracleScratch;
struct RowPlan;
struct WorkUnit;

enum class Isa : uint8_t { portable, avx2, avx512 };

// Lanes of every reduction (dot products, softmax sums) on every ISA; head widths pad to it.
inline constexpr int kOracleLanes = 8;

// The entry points of one ISA's kernels.
struct OracleKernels {
  Isa isa = Isa::portable;
  const char* name = "";  // e.g. "AVX2+FMA (4 doubles per vector)"
  int lanes = 2;          // doubles per vector register
  // One work unit of attend (oracle_kernel.h): its queries' rows of the layer's results.
  void (*attend_unit)(const WorkUnit& unit, const RowPlan& row_plan, size_t r, const Materialised& m,
                      int64_t query_base, const LayerOut& out, OracleScratch& scratch) = nullptr;
  // e^x for x <= 0 as the softmax computes it (oracle_exp.h).
  double (*exp_nonpositive)(double x) = nullptr;
  // The bench's peaks, one thread's share: `iters` steps of independent FMA chains, as many as the
  // ISA keeps in registers (returns the FLOPs done; *sink keeps the chains live), and a sum over
  // p[0 .. n), n a multiple of 64.
  double (*fma_chains)(int64_t iters, double* sink) = nullptr;
  double (*stream_sum)(const double* p, int64_t n) = nullptr;
};

std::string_view isa_name(Isa isa);                   // "portable", "avx2", "avx512"
std::optional<Isa> parse_isa(std::string_view name);  // the inverse
bool cpu_runs(Isa isa);                               // this CPU (and build) can run isa's kernels
std::vector<Isa> runnable_isas();                     // portable first
std::string runnable_isa_names();                     // "portable, avx2, avx512"

// The kernels in use: KVFUZZ_ORACLE_ISA's, else the best runnable. A KVFUZZ_ORACLE_ISA that names
// no ISA, or one this CPU cannot run, prints why and exits 2.
const OracleKernels& oracle_kernels();

// From now on the oracle runs isa's kernels; isa must be runnable (cpu_runs). Not to be called
// while an oracle runs.
void use_oracle_isa(Isa isa);

}  // namespace kvfuzz
