// The custom mutator the structure-aware targets share: inputs are JSON cases, and a mutation is
// one field-level change of the decoded scenario (fuzz/mutate.h), written back as JSON.
//
// Include it in exactly one translation unit of a target; it defines LLVMFuzzerCustomMutator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz/mutate.h"
#include "reference/scenario_json.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  kvfuzz::Scenario s = kvfuzz::decode_case(data, size);
  kvfuzz::Rng rng(seed);
  const int changes = 1 + static_cast<int>(rng.below(3));
  for (int i = 0; i < changes; ++i) kvfuzz::mutate(s, rng);
  const std::string text = kvfuzz::to_json(s);
  if (text.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);  // too big: let bytes mutate
  std::memcpy(data, text.data(), text.size());
  return text.size();
}
