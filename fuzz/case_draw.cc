#include "fuzz/case_draw.h"

#include "fuzz/replay.h"

#include "reference/rng.h"

namespace kvfuzz {
namespace {

constexpr uint64_t kDrawTag = 0x64726177;     // "draw": a case's later draws
constexpr uint64_t kShapeTag = 0x7368617065;  // "shape"

// Tallies one draw against every backend; true when one of them supports it.
bool tally(const ShapePool& pool, const Scenario& s, CaseDraw& d) {
  d.draws++;
  bool any = pool.backends().empty();
  for (size_t b = 0; b < pool.backends().size(); ++b) {
    if (runnable(*pool.backends()[b], s).ok) any = true;
    else d.unsupported[b]++;
  }
  return any;
}

}  // namespace

uint64_t campaign_case_seed(uint64_t seed, int64_t index) {
  return hash_words(seed, static_cast<uint64_t>(index), 0x6b76667a);
}

bool ShapePool::any_supports(const Scenario& s) const {
  for (const Backend* b : backends_)
    if (runnable(*b, s).ok) return true;
  return backends_.empty();
}

std::optional<std::pair<uint64_t, CaseShape>> ShapePool::find(Profile profile, uint64_t v) const {
  // A shape is kept when one of a few workloads on it is supported: a shape no backend can run
  // (a dtype or head dim outside every declaration) would only make unsupported cases.
  for (int32_t a = 0; a < kMaxShapeDraws; ++a) {
    const uint64_t shape_seed =
        hash_words(shape_seed_, v, static_cast<uint64_t>(profile), kShapeTag + static_cast<uint64_t>(a));
    const CaseShape shape = generate_shape(shape_seed, profile);
    for (uint64_t w = 0; w < 4; ++w)
      if (std::optional<Scenario> s = generate(hash_words(shape_seed, w), profile, shape); s && any_supports(*s))
        return std::make_pair(shape_seed, shape);
  }
  return std::nullopt;
}

std::optional<std::pair<uint64_t, CaseShape>> ShapePool::shape(Profile profile, int64_t v) {
  const std::pair<int, int64_t> key{static_cast<int>(profile), v};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = shapes_.find(key); it != shapes_.end()) return it->second;
  }
  const auto found = find(profile, static_cast<uint64_t>(v));
  std::lock_guard<std::mutex> lock(mu_);
  return shapes_.emplace(key, found).first->second;
}

CaseDraw draw_case(ShapePool& pool, int64_t index, Profile profile, int reuse_shapes, int shape_run) {
  CaseDraw d;
  d.unsupported.assign(pool.backends().size(), 0);
  const uint64_t seed = pool.seed();
  auto keep = [&](Scenario s, uint64_t s_seed, std::optional<uint64_t> shape_seed) {
    d.scenario = std::move(s);
    d.seed = s_seed;
    d.shape_seed = shape_seed;
    return d;
  };
  std::optional<std::pair<uint64_t, CaseShape>> shape;
  if (profile == Profile::long_ || reuse_shapes <= 0) {
    // The case as it always was, when a backend supports it.
    const uint64_t first = campaign_case_seed(seed, index);
    Scenario s = generate(first, profile);
    if (profile == Profile::long_ || tally(pool, s, d)) return keep(std::move(s), first, std::nullopt);
    // A narrow declaration: a shape within it first (its own, case `index`'s), then workloads on it.
    shape = pool.find(profile, hash_words(static_cast<uint64_t>(index), kDrawTag));
  } else {
    // Shapes introduced so far: one per reuse_shapes cases; a new one on each multiple. The run of
    // cases [first, last] (one case when shape_run is 1) takes the shape a multiple in it
    // introduces, else one drawn for the run among those its last case knows.
    const int64_t run = std::max(1, shape_run), first = index / run * run, last = first + run - 1;
    const int64_t newest = last / reuse_shapes;
    const int64_t v = newest * reuse_shapes >= first
                          ? newest
                          : static_cast<int64_t>(hash_words(seed, static_cast<uint64_t>(first / run), kShapeTag) %
                                                 static_cast<uint64_t>(newest + 1));
    shape = pool.shape(profile, v);
  }
  for (int32_t k = 1; shape && k <= kMaxDraws; ++k) {
    const uint64_t s_seed = hash_words(seed, static_cast<uint64_t>(index), static_cast<uint64_t>(k), kDrawTag);
    std::optional<Scenario> s = generate(s_seed, profile, shape->second);
    if (s && tally(pool, *s, d)) return keep(std::move(*s), s_seed, shape->first);
  }
  // Nothing supported: the case's first draw, reported unsupported as ever.
  d.supported = false;
  return keep(generate(campaign_case_seed(seed, index), profile), campaign_case_seed(seed, index), std::nullopt);
}

std::string gen_command(const CaseDraw& d, Profile profile) {
  std::string cmd = shell_quote(replay_program()) + " gen --seed " + std::to_string(d.seed);
  if (d.shape_seed) cmd += " --shape " + std::to_string(*d.shape_seed);
  return cmd + " --profile " + std::string(to_string(profile));
}

}  // namespace kvfuzz
