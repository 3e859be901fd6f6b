// The forward batch a backend receives, prepared on the simulated cache.
//
// Where it sits: scenario -> cache -> **forward batch** -> planner. prepare() replays the history
// (cache.h) and then does what the scheduler does before attention runs: allocates the slots of
// the step's new tokens (out_cache_loc), writes req_to_token, builds positions, the spec-decode
// tree mask, and pads the batch to the captured CUDA-graph size with production fill values
// (seq_len 1, request row 0, out_cache_loc 0, position 0). Field conventions follow SEMANTICS.md
// §2 and reference/CONVENTIONS.md; planners read only these fields and the cache state.
//
//   Prepared p = prepare(scenario);          // throws InvalidCase
//   for (int32_t i = 0; i < p.batch.bs; ++i) use(p.batch.seq_lens[i]);
#pragma once

#include <cstdint>
#include <vector>

#include "reference/cache.h"
#include "reference/scenario.h"

namespace kvfuzz {

struct ForwardBatch {
  Mode mode = Mode::idle;
  int32_t bs = 0;         // real rows
  int32_t padded_bs = 0;  // graph_bs when captured, else bs
  bool captured = false;  // replayed from a CUDA graph captured at padded_bs (even when bs == padded_bs)
  int32_t page_size = 1;
  int32_t topk = 1, draft_tokens = 0, draft_steps = 0, draft_step = 0, kv_splits = 1;
  int32_t device_sms = 0;  // Batch::device_sms

  // Per row, [padded_bs]; padded rows come after the real ones.
  std::vector<int32_t> request_ids;       // scenario ids; -1 on padded rows
  std::vector<int32_t> req_pool_indices;  // req_to_token rows; 0 on padded rows
  std::vector<int32_t> seq_lens;          // the mode's convention; 1 on padded rows
  std::vector<int32_t> prefix_lens;       // committed tokens before the step (extend_prefix_lens)
  std::vector<int32_t> extend_lens;       // query tokens of the row
  int64_t seq_lens_sum = 0;               // over padded rows too

  // Per query token, [num_tokens], row by row.
  std::vector<int32_t> positions;         // 0 on padded rows
  std::vector<int32_t> token_columns;     // logical column of the token's content; -1 padded
  // Slots written by this step: per query token, except draft_decode where it is the whole
  // drafting layout [padded_bs][topk][draft_steps] (this step writes [.][.][draft_step]), and
  // draft_q_only, which writes nothing (empty).
  std::vector<int64_t> out_cache_loc;

  // target_verify: per row D rows x (seq_len + D) columns, row-major, rows concatenated; prefix
  // columns all true, draft column c of draft r true iff c is r or an ancestor of r.
  std::vector<uint8_t> custom_mask;

  int64_t num_tokens() const { return static_cast<int64_t>(positions.size()); }
  bool graph() const { return captured; }
};

struct Prepared {
  CacheState cache;
  ForwardBatch batch;
};

// Throws InvalidCase (naming history[i] or batch fields) when the history or the batch cannot
// happen on this cache: unknown requests, exhausted pools or rows, contexts too long.
Prepared prepare(const Scenario& s);

}  // namespace kvfuzz
