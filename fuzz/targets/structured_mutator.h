// The custom mutator the structure-aware targets share: inputs are JSON cases, and a mutation is
// one to three field-level changes of the decoded scenario (fuzz/mutate.h), written back as JSON.
// Changes that outgrow the fuzz budget (fuzz/fuzz_budget.h) are dropped, so inputs stay small.
//
// The case the mutator last wrote is kept with its text: when the target, or the next mutation,
// gets those bytes back, input_case returns it without parsing and validating it again (the
// round trip is exact: the case_parser target checks it).
//
// Include it in exactly one translation unit of a target; it defines LLVMFuzzerCustomMutator.
//
//   const kvfuzz::Scenario& s = kvfuzz::input_case(data, size);   // in LLVMFuzzerTestOneInput
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz/fuzz_budget.h"
#include "fuzz/mutate.h"
#include "reference/scenario_json.h"

namespace kvfuzz {
namespace structured {

struct Written {
  bool filled = false;
  std::string text;   // the bytes the mutator returned
  Scenario scenario;  // the valid case they hold
};

inline Written& last_written() {
  static Written w;
  return w;
}

}  // namespace structured

// The valid case that `data` holds (decode_case), taken from the mutator's last output when the
// bytes are the same. The reference stays valid until the next call.
inline const Scenario& input_case(const uint8_t* data, size_t size) {
  structured::Written& w = structured::last_written();
  if (!w.filled || size != w.text.size() || std::memcmp(data, w.text.data(), size) != 0) {
    w.scenario = decode_case(data, size);
    w.text.assign(reinterpret_cast<const char*>(data), size);
    w.filled = true;
  }
  return w.scenario;
}

}  // namespace kvfuzz

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  const kvfuzz::Scenario original = kvfuzz::input_case(data, size);
  const kvfuzz::FuzzBudget budget = kvfuzz::FuzzBudget{}.widened_to(original);
  kvfuzz::Rng rng(seed);
  kvfuzz::Scenario s = original;
  for (int attempt = 0; attempt < 8; ++attempt) {
    kvfuzz::Scenario candidate = original;
    const int changes = 1 + static_cast<int>(rng.below(3));
    for (int i = 0; i < changes; ++i) kvfuzz::mutate(candidate, rng);
    if (budget.admits(candidate)) {
      s = std::move(candidate);
      break;
    }
  }
  std::string text = kvfuzz::to_json(s);
  if (text.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);  // too big: let bytes mutate
  std::memcpy(data, text.data(), text.size());
  kvfuzz::structured::last_written() = {true, std::move(text), std::move(s)};
  return kvfuzz::structured::last_written().text.size();
}
