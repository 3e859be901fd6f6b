// The one case type of kvfuzz.
//
// Where it sits: every producer (the generator, libFuzzer decoders, JSON case files) makes a
// Scenario, and every consumer (cache simulator, oracle, planners) takes one. It is plain data:
// a model, a cache configuration, an allocator history that brings the cache into a state, a
// forward batch to run on it, and how to fill values. `validate` (validate.h) is the only place
// that decides whether a Scenario is well formed; `to_json`/`from_json` (scenario_json.h) the
// only place that serializes it.
//
// Vocabulary: a *request* is named by a small id that the history admits; a *column* is an
// index into the request's req_to_token row (the logical token index; for spec-decode drafts it
// differs from the *position*, which is what attention masks look at).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference/dtype.h"

namespace kvfuzz {

// Case files: version 2 added batch.device_sms. Version 1 files still read, with device_sms 0
// (static KV splits, what every version 1 case ran with). Version 3 added the `share` op (a
// request admitted onto another's cached prefix pages); a case without one is still written as
// version 2, so every older file and tool reads it.
inline constexpr int kScenarioVersion = 3;
inline constexpr int kShareScenarioVersion = 3;
inline constexpr int kOldestScenarioVersion = 1;

// ---------------------------------------------------------------------------------- model --

enum class LayerKind : uint8_t {
  full,            // causal: keys [0, P]
  sliding_window,  // keys [max(0, P - window), P]: window + 1 keys (window = sliding_window - 1)
  chunked,         // keys [floor(P / chunk) * chunk, P] (Llama 4 local attention)
};

struct Layer {
  LayerKind kind = LayerKind::full;
  int32_t window = 0;  // sliding_window only: radius W
  int32_t chunk = 0;   // chunked only: C, a multiple of the page size
  // fp8_e4m3 caches only: vLLM's per-layer per-tensor scales (layer._k_scale, layer._v_scale). The
  // cache stores e4m3(x / scale), saturated; a kernel reads stored * scale (dtype.h dequantize_fp8).
  // 1 = unscaled (every case before them). MLA: the latent has one scale, k_scale.
  float k_scale = 1.0f;
  float v_scale = 1.0f;

  bool scaled() const { return k_scale != 1.0f || v_scale != 1.0f; }
  bool operator==(const Layer&) const = default;
};

struct Model {
  int32_t q_heads = 1;
  int32_t kv_heads = 1;    // q_heads % kv_heads == 0 (GQA/MQA)
  int32_t head_dim = 8;    // K and Q width
  int32_t v_head_dim = 8;  // V width
  // MLA-style latent cache: one KV head whose V is the first v_head_dim dims of K
  // (kv_lora_rank = v_head_dim, rope_dim = head_dim - v_head_dim).
  bool mla = false;
  double sm_scale = 0.0;  // softmax scale applied to q.k
  double softcap = 0.0;   // logits become softcap * tanh(logit / softcap); 0 = off
  std::vector<Layer> layers;
  // Attention sinks (gpt-oss): one learned logit per q head, empty = none. Every layer's softmax
  // takes e^(sinks[h]) into its denominator only, beside the (scaled, capped) logits of the keys:
  // out = sum_j e^(s_j) v_j / (e^(sinks[h]) + sum_j e^(s_j)), lse = log(e^(sinks[h]) + sum_j e^(s_j)).
  std::vector<double> sinks;  // [q_heads] or empty

  bool operator==(const Model&) const = default;
};

// ---------------------------------------------------------------------------------- cache --

struct CacheConfig {
  int32_t page_size = 1;        // 1..256, not necessarily a power of two
  int32_t full_pages = 0;       // allocatable pages of the full pool (page 0 comes on top)
  int32_t swa_pages = 0;        // allocatable pages of the SWA pool; 0 = no separate pool
  int32_t max_requests = 1;     // req_to_token rows (row 0, the padding row, comes on top)
  int32_t max_context_len = 1;  // req_to_token columns
  // Freed pages wait on a release list and are merged back sorted when the free list runs short
  // (sglang's need_sort, disaggregated serving). Otherwise the paged allocator (page_size > 1)
  // reuses the most recently freed pages first and the token allocator (page_size 1) the oldest.
  bool sort_free = false;

  bool operator==(const CacheConfig&) const = default;
};

// ------------------------------------------------------------------------------- history --

enum class OpKind : uint8_t {
  admit,      // request: gets a req_to_token row, no tokens yet
  extend,     // request, len: appends len tokens (fills the partial page, then whole pages)
  decode,     // request: appends one token
  free,       // request: releases its row and pages
  swa_evict,  // request: releases SWA pages whose tokens every sliding window has left
  draft,      // request, parents: writes a spec-decode tree of parents.size() draft tokens
  accept,     // request, path: keeps the drafts on `path` (starts at the root 0), frees the rest
  share,      // request, from, len: a just-admitted request takes request `from`'s first len tokens
              // (whole pages) as its own prefix: the same slots, the same content (prefix caching);
              // full-pool caches only (no SWA pool)
};

struct Op {
  OpKind kind = OpKind::admit;
  int32_t request = 0;
  int32_t len = 0;               // extend
  std::vector<int32_t> parents;  // draft: parents[0] = -1, 0 <= parents[i] < i
  std::vector<int32_t> path;     // accept: root-to-leaf draft indices, path[0] = 0
  int32_t from = -1;             // share: the request whose prefix pages are shared

  bool operator==(const Op&) const = default;
};

// --------------------------------------------------------------------------------- batch --

enum class Mode : uint8_t {
  idle,             // no requests
  decode,           // one new token per request
  extend,           // extend_len new tokens after the cached prefix
  mixed,            // extend and decode requests together (a decode is an extend of 1)
  target_verify,    // a spec-decode tree of draft_tokens per request, against the prefix
  draft_extend_v2,  // extend whose seq_len already counts the new tokens
  draft_decode,     // one step of multi-step drafting with topk branches
  draft_q_only,     // one step of a drafter whose layers share the target's KV (vLLM's Gemma-4 MTP):
                    // one query per request at its last committed position, reading the committed
                    // keys, writing nothing (draft_steps, draft_step as for draft_decode; topk 1)
};

// Whether the batch is a drafting loop's step (draft_steps, draft_step name it).
inline bool is_drafting_step(Mode m) { return m == Mode::draft_decode || m == Mode::draft_q_only; }

// Whether each row of a batch of mode `m` has its own extend_len (extend, mixed, draft_extend_v2).
inline bool uses_extend_len(Mode m) { return m == Mode::extend || m == Mode::mixed || m == Mode::draft_extend_v2; }

// Depth of `node` in a spec-decode tree given as parents (parents[0] = -1: the root has depth 0).
inline int32_t tree_depth(const std::vector<int32_t>& parents, int32_t node) {
  int32_t d = 0;
  for (int32_t n = node; parents[static_cast<size_t>(n)] >= 0; n = parents[static_cast<size_t>(n)]) ++d;
  return d;
}

struct BatchEntry {
  int32_t request = 0;
  int32_t extend_len = 0;        // extend, mixed, draft_extend_v2: new tokens (decode: 1)
  std::vector<int32_t> parents;  // target_verify: the tree, as in Op::parents

  bool operator==(const BatchEntry&) const = default;
};

struct Batch {
  Mode mode = Mode::idle;
  std::vector<BatchEntry> entries;
  int32_t draft_tokens = 0;  // target_verify: D, the same for every request
  int32_t topk = 1;          // target_verify, draft_decode: branches per node
  int32_t draft_steps = 0;   // draft_decode, draft_q_only: steps of the drafting loop
  int32_t draft_step = 0;    // draft_decode, draft_q_only: the step this batch runs, 0 <= step < steps
  int32_t graph_bs = 0;      // CUDA-graph captured batch size; 0 = eager
  int32_t kv_splits = 1;     // split-KV decode: partial results merged by LSE (max_kv_splits)
  int32_t device_sms = 0;    // Triton decode split count: 0 = static (every row kv_splits); > 0 =
                             // sglang's adaptive heuristic on a device with this many SMs

  bool operator==(const Batch&) const = default;
};

// -------------------------------------------------------------------------------- values --

enum class Fill : uint8_t {
  random,     // random numbers exactly representable in the dtype
  signature,  // Q = 0; K and V name (request, column) in base-radix digits
};

struct ValueConfig {
  uint64_t seed = 0;
  DType dtype = DType::fp32;
  Fill fill = Fill::random;
  bool poison = true;  // every slot no live token owns holds NaN

  bool operator==(const ValueConfig&) const = default;
};

// ------------------------------------------------------------------------------ scenario --

struct Scenario {
  Model model;
  CacheConfig cache;
  std::vector<Op> history;
  Batch batch;
  ValueConfig values;

  bool operator==(const Scenario&) const = default;
};

std::string to_string(LayerKind k);
std::string to_string(OpKind k);
std::string to_string(Mode m);
std::string to_string(Fill f);

}  // namespace kvfuzz
