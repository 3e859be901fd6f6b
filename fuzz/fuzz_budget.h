// How big a structure-aware fuzz input may grow: small enough that a single-family libFuzzer
// target runs over a thousand cases a second under ASan and UBSan, big enough for the corners
// the generator's tiny profile reaches (page boundaries, several requests, two layers, trees,
// sliding windows and chunks, CUDA-graph padding).
//
// Where it sits: beside the mutator (mutate.h); the custom mutator of the libFuzzer targets
// (fuzz/targets/structured_mutator.h) keeps only mutations that stay inside the budget. An input
// already bigger (an older corpus entry) is not grown further.
//
//   const FuzzBudget budget = FuzzBudget{}.widened_to(s);
//   if (budget.admits(mutated)) s = mutated;
#pragma once

#include <cstdint>

#include "reference/scenario.h"

namespace kvfuzz {

struct FuzzBudget {
  int32_t max_requests = 8;     // distinct requests in the history and the batch, freed ones too
  int32_t max_tokens = 64;      // tokens any one request holds (history and this step)
  int32_t max_history_ops = 16;
  int32_t max_layers = 2;
  int32_t max_q_heads = 4;
  int32_t max_head_dim = 16;    // K and V widths (MLA: latent plus rope)
  int32_t max_page_size = 16;
  int32_t max_batch = 8;        // batch entries and CUDA-graph size

  bool admits(const Scenario& s) const;
  // This budget raised to cover `s`, so that an input bigger than it may still be mutated.
  FuzzBudget widened_to(const Scenario& s) const;
};

}  // namespace kvfuzz
