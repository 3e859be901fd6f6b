// A property violation, written for the person who has to fix it.
//
// Where it sits: every property produces Findings; the command line prints them, campaigns save
// the case that produced them, the shrinker keeps a case only while it fails with the same
// (property, backend). A report names the backend, layer, request, query position, the expected
// and the actually read key positions, and the offending index and buffer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvfuzz {

struct Finding {
  Finding() = default;
  Finding(std::string property_, std::string backend_, std::string message_, int32_t layer_ = -1, int32_t row_ = -1,
          int64_t token_ = -1, std::string variant_ = {})
      : property(std::move(property_)),
        backend(std::move(backend_)),
        message(std::move(message_)),
        layer(layer_),
        row(row_),
        token(token_),
        variant(std::move(variant_)) {}

  std::string property;  // in-bounds, cache-extent, stride-divide, metadata, oracle, metamorphic, replay
  std::string backend;
  std::string message;
  int32_t layer = -1;
  int32_t row = -1;
  int64_t token = -1;
  std::string variant;  // the metamorphic variant it was found in; empty: the case itself
  // What went wrong, in words that do not depend on the case's sizes (fingerprint.h): set by the
  // property that knows ("missing-oldest", "kv_indices:write-above", "values:lse-base2"); empty
  // where the message is all there is (fingerprint_of normalises it).
  std::string mechanism;
  // The ranks of decode-context parallelism the backend's plan ran over (Plan::dcp_world; 1: none,
  // or no plan): set by the property harness (check_run, check_metamorphic) for the fingerprint.
  int32_t dcp_world = 1;

  // Reproducing it needs the metamorphic variants (a comparison, or a failure inside a variant).
  bool needs_variants() const { return !variant.empty() || property == "metamorphic" || property == "replay"; }

  // "property/backend": what the shrinker keeps constant.
  std::string signature() const { return property + "/" + backend; }
};

// Ascending integers as compact ranges: "0..11, 16, 18..19".
std::string format_ranges(std::vector<int64_t> values);

}  // namespace kvfuzz
