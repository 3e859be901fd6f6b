// Structure-aware mutation: one random change to a scenario's fields, kept only if the result
// validates. What libFuzzer's custom mutator does instead of flipping bytes.
//
// Where it sits: under the libFuzzer targets (fuzz/targets/). The bytes a target sees are a JSON
// case; decode_case turns any bytes into a valid scenario (falling back to a generated one), and
// mutate changes one field — a page size, an op of the history, a batch entry, a layer, a tree
// node, a dtype — the way the generator would have chosen it.
//
//   Scenario s = decode_case(data, size);
//   Rng rng(seed);
//   mutate(s, rng);            // s stays valid
#pragma once

#include <cstddef>
#include <cstdint>

#include "reference/rng.h"
#include "reference/scenario.h"

namespace kvfuzz {

// Any bytes: a case file that validates, else a tiny generated case seeded by the bytes' hash.
Scenario decode_case(const uint8_t* data, size_t size);

// Applies one random valid change (tries up to 32 candidates; leaves s unchanged if none validates).
void mutate(Scenario& s, Rng& rng);

}  // namespace kvfuzz
