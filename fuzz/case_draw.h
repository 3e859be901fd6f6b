// How a campaign draws its case i: within the backends' declared support, on a reused shape.
//
// Where it sits: between the campaign (campaign.cc) and the generator (reference/generate.h).
// Case i stays a pure function of (seed, shape seed, i, profile, the backends' declarations), so any case of a
// campaign replays from its printed `kvfuzz gen` line:
// - Within support: a draw that no backend can run (runnable, backend.h: what each declares, dtype,
//   page size, head dims, layer kinds, mode, ..., and no share op for an opaque executor) is drawn again, so a campaign
//   of one real executor spends its time on cases it can check: first a shape within the declarations, then workloads
//   on it. A case whose first draw is supported is the case as it always was. Every draw is tallied per backend: how
//   much of the generator's space each declaration leaves out.
// - Shape reuse (`reuse_shapes` N > 0): a real kernel compiles a variant per shape (page size,
//   model, dtype: CaseShape); case i takes a new shape when i % N == 0, else one of the shapes
//   already drawn for its profile, so JIT compiles grow by one shape per N cases, not per case.
//   A shape is itself drawn within support (some case on it must be supported).
//   With `shape_run` R > 1 the pick is made once per run of R consecutive cases (all of a profile's
//   cases in the run share one shape), so cases of one shape are in flight at once and an executor
//   server can batch them (docs/gpu.md "Batching"); R = 1 is the draw as it always was.
//
//   ShapePool shapes(seed, /*shape_seed=*/seed, backends);
//   CaseDraw d = draw_case(shapes, i, Profile::small, /*reuse_shapes=*/64);
//   std::string line = gen_command(d, Profile::small);  // "kvfuzz gen --seed ... --shape ..."
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "reference/generate.h"

namespace kvfuzz {

inline constexpr int32_t kMaxDraws = 64;         // workloads tried on a shape
inline constexpr int32_t kMaxShapeDraws = 1024;  // shapes tried for one within the declarations

// The seed of case `index`'s first draw.
uint64_t campaign_case_seed(uint64_t seed, int64_t index);

struct CaseDraw {
  Scenario scenario;
  uint64_t seed = 0;                   // generate(seed, profile) or generate(seed, profile, shape)
  std::optional<uint64_t> shape_seed;  // the shape: generate_shape(*shape_seed, profile)
  int32_t draws = 0;                   // draws made, the kept one included
  std::vector<int32_t> unsupported;    // per backend (in the pool's order): draws it did not support
  bool supported = true;               // false: no draw was; the first is kept
};

// The campaign's shapes per profile, drawn once each (thread-safe).
class ShapePool {
 public:
  // Cases draw from `seed`, shapes from `shape_seed`.
  ShapePool(uint64_t seed, uint64_t shape_seed, std::vector<const Backend*> backends)
      : seed_(seed), shape_seed_(shape_seed), backends_(std::move(backends)) {}
  // Shape `v` of `profile` (drawn once): its seed and value; nullopt when no shape in
  // kMaxShapeDraws draws has a supported case.
  std::optional<std::pair<uint64_t, CaseShape>> shape(Profile profile, int64_t v);
  // The same search, not remembered (a case's own shape).
  std::optional<std::pair<uint64_t, CaseShape>> find(Profile profile, uint64_t v) const;
  uint64_t seed() const { return seed_; }
  const std::vector<const Backend*>& backends() const { return backends_; }
  bool any_supports(const Scenario& s) const;

 private:
  uint64_t seed_, shape_seed_;
  std::vector<const Backend*> backends_;
  std::mutex mu_;
  std::map<std::pair<int, int64_t>, std::optional<std::pair<uint64_t, CaseShape>>> shapes_;
};

// Case `index` of the campaign (reuse_shapes 0: each case its own shape; shape_run: above).
CaseDraw draw_case(ShapePool& pool, int64_t index, Profile profile, int reuse_shapes, int shape_run = 1);

// The command that prints the drawn case: "kvfuzz gen --seed S [--shape T] --profile P".
std::string gen_command(const CaseDraw& d, Profile profile);

}  // namespace kvfuzz
