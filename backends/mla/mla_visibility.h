// The layer rules the mla kernels apply as masks: production MLA models are full attention
// (FlashMLA and cutlass MLA have no window), so sliding windows and chunked local attention are
// masks on positions inside the mla kernels, not metadata.
//
// Where it sits: both mla executors (latent decode and prefill) AND their key masks with
// lowest_position(layer, P) of the query's position P; a key at position p is kept iff
// p >= lowest_position. Positions come from ForwardBatch::positions (tree drafts share them).
//
//   if (key_position < lowest_position(layer, query_position)) continue;   // masked
#pragma once

#include <algorithm>
#include <cstdint>

#include "reference/scenario.h"

namespace kvfuzz::mla {

// Lowest key position a query at `position` keeps in `layer` (SEMANTICS §3).
inline int32_t lowest_position(const Layer& layer, int32_t position) {
  switch (layer.kind) {
    case LayerKind::full: return 0;
    case LayerKind::sliding_window: return std::max(0, position - layer.window);
    case LayerKind::chunked: return position / layer.chunk * layer.chunk;
  }
  return 0;
}

}  // namespace kvfuzz::mla
