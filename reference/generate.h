// Deterministic case generation: a seed and a size profile give one valid Scenario, byte for byte
// the same on any machine and compiler.
//
// Where it sits: the main front end of the fuzz campaign and of the property tests. Every choice
// comes from a counter-based Rng (rng.h), no floating point decides anything, and each part of the
// case draws from its own forked stream. Choices are weighted toward the corners that break
// backends: lengths at page boundaries (ps-1, ps, ps+1), odd page sizes, partial last pages, reuse
// of freed pages, non-identity SWA mappings and evicted tokens, chunk boundaries inside an extend,
// deep and wide spec-decode trees, CUDA-graph padding.
//
//   Scenario s = generate(42, Profile::small);
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "reference/rng.h"
#include "reference/scenario.h"

namespace kvfuzz {

// tiny..large run on a CPU machine in seconds; `long` is for GPU machines: one request of at
// least 131072 keys in a pool of more than 2^31 elements per layer (generate_long.cc), to probe
// real kernels' 32-bit index arithmetic. Its pools are sparse: a long case needs up to ~5 GB of
// RAM in kvfuzz, ~11 GB in a Python adapter and ~4 GB of /dev/shm (README, "Size profiles").
// `gpt-oss` draws small cases on gpt-oss-shaped models (generate_gpt_oss_model): eight q heads per
// KV head, sliding-window and full layers alternating, and a learned attention sink per q head.
// `fp8` draws small cases on fp8_e4m3 caches with per-layer K and V scales (generate_kv_scales),
// as vLLM stores `--kv-cache-dtype fp8` caches. `gemma4` draws gpt-oss's cases without sinks
// (sliding and full layers, as Gemma-4's) and turns every decode, verify and drafting step into a
// draft_q_only step (Gemma-4's MTP drafting: generate_q_only); extends and draft_extend_v2 stay.
enum class Profile : uint8_t { tiny, small, medium, large, long_, gpt_oss, fp8, gemma4 };
inline constexpr Profile kProfiles[] = {Profile::tiny,  Profile::small,   Profile::medium, Profile::large,
                                        Profile::long_, Profile::gpt_oss, Profile::fp8,    Profile::gemma4};

std::string_view to_string(Profile p);
std::optional<Profile> parse_profile(std::string_view s);

// Always returns a scenario that passes validate(). A draw of tiny..large that keeps exceeding
// the limits falls back to the next smaller profile; `long` is outside that chain and retries
// within itself.
Scenario generate(uint64_t seed, Profile profile);

// The part of a case a real kernel compiles a variant for (backends/external/pair_backend.cc's
// kernel_variant): page size, model (heads, head dims, layers with their windows and chunks, MLA,
// softcap) and dtype. A campaign that reuses shapes keeps JIT compiles few (fuzz/case_draw.h).
//
//   CaseShape shape = generate_shape(11, Profile::small);
//   std::optional<Scenario> s = generate(42, Profile::small, shape);  // case 42's workload on it
struct CaseShape {
  int32_t page_size = 1;
  Model model;
  DType dtype = DType::fp32;
};
CaseShape generate_shape(uint64_t seed, Profile profile);
// A case whose shape is `shape` and whose workload and values come from `seed`: nullopt when no
// draw of the workload fits the profile's limits on this shape. Not for `long`.
std::optional<Scenario> generate(uint64_t seed, Profile profile, const CaseShape& shape);

// Size bounds of a profile; the generators stay inside them.
struct ProfileBounds {
  int32_t max_q_heads, max_head_dim, max_layers, max_page_size, max_context_len, max_requests;
  int32_t max_ops, max_extend, max_batch, max_draft_tokens;
};
ProfileBounds bounds(Profile p);

// Parts of generation, each drawing from its own stream (generate_model.cc, generate_history.cc).
Model generate_model(Rng rng, const ProfileBounds& b, int32_t page_size);
// A gpt-oss-shaped model (the `gpt-oss` profile): GQA with 8 q heads per KV head, head_dim up to
// 64, sm_scale 1/sqrt(head_dim), no softcap, sliding-window layers (even, one window) and full ones (odd),
// and one sink logit per q head, a multiple of 1/8 (exact in bf16, gpt-oss's parameter dtype).
Model generate_gpt_oss_model(Rng rng, const ProfileBounds& b, int32_t page_size);
int32_t generate_page_size(Rng& rng, const ProfileBounds& b);
// The `fp8` profile's per-tensor scales, per layer (Layer::k_scale, v_scale): 1 a quarter of the
// time, else m/8 * 2^e with m in [8, 15] and e in [-8, 2] (4 significand bits, limits.h); at 2^-8
// the largest values saturate at 448.
void generate_kv_scales(Rng rng, Model& m);
// A length in [1, max], often at a page boundary.
int32_t corner_length(Rng& rng, int32_t page_size, int32_t max);
// Fills cache sizes, history and batch; returns false if this draw could not be made valid.
bool generate_workload(Rng rng, const ProfileBounds& b, Scenario& s);
// Model, cache, history and batch of a `long` case (generate_long.cc); values and device_sms are
// the caller's.
Scenario generate_long(Rng rng);

}  // namespace kvfuzz
