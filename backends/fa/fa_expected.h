// What every fa call must read, derived from the forward batch alone — written extents, tree
// masks, drafting layout, chunk boundaries by position — for check_metadata to compare with the
// planner's tables. It shares no code with the planner: the planner follows production's
// formulas (strided tables, make_local_attention_virtual_batches), this file the definitions
// (keys a row's queries sit at the end of; queries grouped by the chunk they fall in).
//
// Where it sits: FaPlan::check_metadata (fa_check.cc) -> **expected_parts** -> MetadataChecker.
// Only real batch rows are described; padded CUDA-graph rows are checked to stay in page 0.
//
//   for (const ExpectedPart& p : expected_parts(fb, GroupKind::full, 0)) ...
#pragma once

#include <cstdint>
#include <vector>

#include "backends/fa/fa_plan.h"

namespace kvfuzz::fa {

// A key past a row's run: its logical column (checked where visible) and the req_to_token column
// holding it, which differs for branch copies and drafts in page regions (reference/draft_layout.h).
struct ExpectedKey {
  int32_t column = 0;
  int32_t r2t_column = 0;
};

// One kernel row: its queries and, key by key, what each key must hold.
struct ExpectedRow {
  int32_t batch_row = 0;
  int32_t q_len = 0;
  int32_t first_column = 0;  // keys [0, run) are columns first_column + k
  int32_t run = 0;
  std::vector<ExpectedKey> keys;  // then one key each

  int32_t k_len() const { return run + static_cast<int32_t>(keys.size()); }
};

struct ExpectedPart {
  int32_t view_page_size = 1;  // 1 for token-slot tables, ps for page tables
  bool causal = true;
  std::vector<ExpectedRow> rows;  // real rows, in kernel-row order
  // A cascade's prefix part: one kernel row holds every real query token and reads keys that
  // every batch row holds; `rows` then says, per batch row, which columns those keys are.
  bool shared_row = false;
  // Decode-context parallelism: the rank whose pool this part reads (its keys resolve through the
  // call's rank_slots); -1 for a part that reads the layer's pool.
  int32_t rank = -1;
};

// The parts of the group a layer of `kind` (and chunk size) reads in this batch; a cascade over
// a common prefix of `common_prefix_len` keys (FaGroup) for full and sliding groups.
std::vector<ExpectedPart> expected_parts(const ForwardBatch& fb, GroupKind kind, int32_t chunk,
                                         int32_t common_prefix_len = 0);

// Decode-context parallelism over `world` ranks with interleave `interleave` (FaGroup::dcp_world):
// rank r holds the request's columns p with (p / interleave) % world == r, its k-th local key is
// column (k / I) * R * I + r * I + k % I, read through a table of the rank's block size
// (page_size / world); each rank's part reads its share of every row's context (the keys before the
// row's queries), not causal; then one part of the step's new tokens, causal, as token slots.
// with_context false: that last part alone (vLLM skips the context when no row has any).
std::vector<ExpectedPart> dcp_parts(const ForwardBatch& fb, int32_t world, int32_t interleave, bool with_context);

}  // namespace kvfuzz::fa
