// A finding's fingerprint: what went wrong, by mechanism, not by configuration.
//
// Where it sits: after the properties, before everything that groups findings (campaigns save,
// shrink and count per fingerprint key; adapters/triage.py matches known issues on the fields).
// The same mechanism gives the same key across seeds, page sizes, sizes and layers; different
// mechanisms give different keys (syzkaller's crash title, ClusterFuzz's crash state). The key
// holds the property, the backend (a release in its name stripped), the batch mode, the failing
// layer's kind and the mechanism; the window, chunk and the case's context (page size, topk,
// hybrid pool, CUDA graph, head dims, decode-context parallelism ...) ride along for known issues to
// match on, outside the key.
//
//   const Fingerprint fp = fingerprint_of(scenario, finding);
//   fp.key();      // "cache-extent/sglang_fa:fa/decode/sliding_window: missing-oldest"
//   fp.to_json();  // every field (docs/triage.md)
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "properties/finding.h"
#include "reference/scenario.h"

namespace kvfuzz {

struct Fingerprint {
  std::string property;
  std::string backend;   // "sglang_fa:fa": the name with its release taken out
  std::string planner;   // the part before ':' (the whole name for a built-in backend)
  std::string executor;  // the part after ':', or ""
  std::string release;   // "0.5.23" from "sglang_fa_0_5_23", or ""
  std::string mode;
  std::string layer_kind;  // the failing layer's kind; "" when the finding names no layer
  int32_t window = 0;      // the failing layer's window radius (sliding_window) or chunk (chunked)
  int32_t chunk = 0;
  std::string mechanism;
  std::string variant;  // the metamorphic variant the finding was made in, or ""
  // Context: matched by known issues, not part of the key.
  int32_t page_size = 1;
  int32_t topk = 1;
  bool hybrid = false;
  bool sliding_layers = false;  // the model has a sliding-window layer (a full-layer bug can need one)
  bool graph = false;
  bool deterministic = false;  // the planner serves as --enable-deterministic-inference (_det)
  int64_t pool_elements = 0;   // one layer's K pool: slots x kv_heads x max(head_dim, v_head_dim)
  int32_t head_dim = 0;
  int32_t v_head_dim = 0;
  bool sinks = false;  // the model has attention sinks (Model::sinks)
  // draft_decode: some batch request's last step that grew it was a verify (an accept in the history:
  // a drafter after it sees rejected drafts), not an extend, share or decode
  bool after_verify = false;
  // The ranks of vLLM's decode-context parallelism the plan ran over (Finding::dcp_world); 1: none.
  // In to_json's context only when > 1, so a fingerprint without DCP reads as before it existed.
  int32_t dcp = 1;

  std::string key() const;
  nlohmann::json to_json() const;
};

Fingerprint fingerprint_of(const Scenario& s, const Finding& f);

// A message with what varies from case to case taken out: numbers become N, quoted strings Q, a
// leading "layer 0 (full), row 2 (request 5), ..." location goes; at most 160 characters.
std::string normalize_message(const std::string& message);

// The mechanism of a program failure (crash, hang, contract): the exception's last line and, for
// a Python traceback, the innermost function ("IndexError: list index out of range @ make_batches").
std::string failure_mechanism(const std::string& message);

// The mechanism of a checked buffer or pool access out of its bounds: "kv_indices:write-above",
// "full KV pool:outside", "custom_mask:guard-after".
std::string bounds_mechanism(const std::string& buffer, const std::string& what);

}  // namespace kvfuzz
