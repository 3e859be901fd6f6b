#include "reference/generate.h"

#include <algorithm>
#include <iterator>

#include "reference/limits.h"
#include "reference/validate.h"

namespace kvfuzz {

std::string_view to_string(Profile p) {
  switch (p) {
    case Profile::tiny: return "tiny";
    case Profile::small: return "small";
    case Profile::medium: return "medium";
    case Profile::large: return "large";
    case Profile::long_: return "long";
    case Profile::gpt_oss:
      return "gpt-oss";
    case Profile::fp8:
      return "fp8";
    case Profile::gemma4:
      return "gemma4";
  }
  return "?";
}

std::optional<Profile> parse_profile(std::string_view s) {
  for (Profile p : kProfiles)
    if (s == to_string(p)) return p;
  return std::nullopt;
}

ProfileBounds bounds(Profile p) {
  //      heads dim  layers ps   ctx   reqs ops  extend batch drafts
  switch (p) {
    case Profile::tiny: return {4, 8, 2, 8, 64, 4, 12, 16, 3, 6};
    case Profile::small: return {8, 32, 3, 32, 256, 8, 32, 64, 6, 12};
    case Profile::medium: return {16, 64, 4, 64, 2048, 16, 96, 512, 12, 24};
    case Profile::large: return {16, 128, 4, 256, 4096, 16, 160, 1024, 8, 64};
    case Profile::long_: return {8, 128, 2, 64, 1 << 18, 3, 160, 64, 3, 0};  // generate_long.cc
    case Profile::gpt_oss:
    case Profile::gemma4:
      return {16, 64, 4, 32, 256, 8, 32, 64, 6, 12};  // generate_gpt_oss_model
    case Profile::fp8:
      return bounds(Profile::small);
  }
  return bounds(Profile::small);
}

namespace {

ValueConfig generate_values(Rng rng) {
  ValueConfig v;
  v.seed = rng.next();
  static constexpr DType kTypes[] = {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3};
  v.dtype = kTypes[rng.below(4)];
  v.fill = rng.chance(1, 8) ? Fill::signature : Fill::random;
  v.poison = !rng.chance(1, 8);
  return v;
}

// The Triton decode split policy: static half the time, else the adaptive heuristic on a device
// of a few SMs (few splits) up to H100 (132) and MI300X (304 CUs), which split small batches finely.
int32_t generate_device_sms(Rng rng) {
  static constexpr int32_t kSms[] = {1, 8, 32, 108, 132, 304};
  return rng.chance(1, 2) ? 0 : kSms[rng.below(std::size(kSms))];
}

// A last resort that is valid by construction: one request, one decode step.
Scenario fallback(uint64_t seed) {
  Scenario s;
  s.model.layers = {Layer{}};
  s.model.sm_scale = 0.25;
  s.cache = {1, 8, 0, 1, 8, false};
  s.history = {{OpKind::admit, 0, 0, {}, {}}, {OpKind::extend, 0, 3, {}, {}}};
  s.batch.mode = Mode::decode;
  s.batch.entries = {{0, 0, {}}};
  s.values.seed = seed;
  return s;
}

// The smallest context that still holds every request: production sizes CUDA-graph buffers from
// the served context, so bugs that forget the draft room only show near a full context.
void tighten_context(Scenario& s) {
  int32_t lo = 1, hi = s.cache.max_context_len;
  while (lo < hi) {
    Scenario t = s;
    t.cache.max_context_len = lo + (hi - lo) / 2;
    if (is_valid(t)) hi = t.cache.max_context_len;
    else lo = t.cache.max_context_len + 1;
  }
  s.cache.max_context_len = hi;
}

// The shape of attempt `rng`: drawn from the same streams as always, so a seed's case is unchanged.
CaseShape draw_shape(const Rng& rng, const ProfileBounds& b, Profile profile) {
  CaseShape shape;
  Rng ps_rng = rng.fork("page_size");
  shape.page_size = generate_page_size(ps_rng, b);
  const bool gpt_oss_shaped = profile == Profile::gpt_oss || profile == Profile::gemma4;
  shape.model = gpt_oss_shaped ? generate_gpt_oss_model(rng.fork("model"), b, shape.page_size)
                               : generate_model(rng.fork("model"), b, shape.page_size);
  if (profile == Profile::gemma4) shape.model.sinks.clear();  // Gemma-4 has none
  shape.dtype = generate_values(rng.fork("values")).dtype;
  if (profile == Profile::fp8) {  // streams of their own: the other profiles' draws are unchanged
    shape.dtype = DType::fp8_e4m3;
    generate_kv_scales(rng.fork("kv_scales"), shape.model);
  }
  return shape;
}

// The `gemma4` profile's step: a decode, verify or drafting step drawn by generate_workload (every
// request of it has a prefix) becomes Gemma-4's drafting step, draft_q_only, at a drafting loop step
// of its own stream (the other profiles' draws are unchanged).
void generate_q_only(Rng rng, Batch& batch) {
  if (batch.mode != Mode::decode && batch.mode != Mode::target_verify && batch.mode != Mode::draft_decode) return;
  batch.mode = Mode::draft_q_only;
  batch.topk = 1;
  batch.draft_tokens = 0;
  for (BatchEntry& e : batch.entries) e.parents.clear();
  batch.draft_steps = static_cast<int32_t>(rng.range(1, std::min(limits::kMaxDraftSteps, 6)));
  batch.draft_step = static_cast<int32_t>(rng.below(static_cast<uint64_t>(batch.draft_steps)));
}

// Attempt `rng`'s workload on `shape`; nullopt when it exceeds the limits.
std::optional<Scenario> draw_case(const Rng& rng, const ProfileBounds& b, const CaseShape& shape, Profile profile) {
  Scenario s;
  s.cache.page_size = shape.page_size;
  s.model = shape.model;
  s.values = generate_values(rng.fork("values"));
  s.values.dtype = shape.dtype;
  if (!generate_workload(rng.fork("workload"), b, s)) return std::nullopt;
  if (profile == Profile::gemma4) generate_q_only(rng.fork("q_only"), s.batch);
  s.batch.device_sms = generate_device_sms(rng.fork("device_sms"));
  // A draw the workload generator could not keep inside the limits: draw again.
  if (!is_valid(s)) return std::nullopt;
  if (rng.fork("full_context").chance(1, 4)) tighten_context(s);
  return s;
}

}  // namespace

CaseShape generate_shape(uint64_t seed, Profile profile) {
  return draw_shape(Rng(seed).fork("shape"), bounds(profile == Profile::long_ ? Profile::large : profile), profile);
}

std::optional<Scenario> generate(uint64_t seed, Profile profile, const CaseShape& shape) {
  const ProfileBounds b = bounds(profile == Profile::long_ ? Profile::large : profile);
  const Rng root(seed);
  for (uint64_t attempt = 0; attempt < 8; ++attempt)
    if (std::optional<Scenario> s = draw_case(root.fork(attempt), b, shape, profile)) return s;
  return std::nullopt;
}

Scenario generate(uint64_t seed, Profile profile) {
  const ProfileBounds b = bounds(profile);
  const Rng root(seed);
  if (profile == Profile::long_) {
    for (uint64_t attempt = 0; attempt < 8; ++attempt) {
      const Rng rng = root.fork(attempt);
      Scenario s = generate_long(rng.fork("long"));
      s.values = generate_values(rng.fork("values"));
      s.batch.device_sms = generate_device_sms(rng.fork("device_sms"));
      if (is_valid(s)) return s;
    }
    return fallback(seed);
  }
  for (uint64_t attempt = 0; attempt < 8; ++attempt) {
    const Rng rng = root.fork(attempt);
    if (std::optional<Scenario> s = draw_case(rng, b, draw_shape(rng, b, profile), profile)) return *s;
  }
  if (profile == Profile::fp8) {  // outside the size chain: the last resort, scaled
    Scenario s = fallback(seed);
    s.values.dtype = DType::fp8_e4m3;
    s.model.layers[0].k_scale = 0.375f;
    s.model.layers[0].v_scale = 0x1p-8f;
    return s;
  }
  if (profile == Profile::gpt_oss) {  // outside the size chain: the last resort, with a sink
    Scenario s = fallback(seed);
    s.model.sinks = {1.0};
    return s;
  }
  if (profile == Profile::gemma4) return fallback(seed);  // outside the size chain: the last resort
  // Draws that keep exceeding the limits (a large profile's oracle work, say): a smaller profile.
  if (profile != Profile::tiny) return generate(seed, static_cast<Profile>(static_cast<int>(profile) - 1));
  return fallback(seed);
}

}  // namespace kvfuzz
