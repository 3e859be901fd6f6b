// Chunked local attention (Llama 4 iRoPE): each row is split into virtual batches, one per chunk
// its queries touch, each reading only its chunk's keys through a slice of the block table.
//
// Where it sits: fa planner -> **local virtual batches** -> FaGroup{local}. Formulas of
// make_local_attention_virtual_batches (sglang flashattention_backend.py, from vLLM;
// SEMANTICS.md §4): with q = q_len, s = k_len, p = s - q:
//   f = min(C - p % C, q), n = 1 + ceil((q - f) / C), t = (s - 1) % C + 1;
//   virtual batch j (rj = n - 1 - j): q_len f (j = 0) else min(q - f - C (j - 1), C),
//   k_len C (t for the last), k_start = s - (rj C + t); block row = table[k_start / ps + [0, C / ps)],
//   columns clipped to the table's last one as production does.
//
//   FaCall local = make_local_attention({base, base.page_table, base.width, ps, rows}, chunk, ...);
#pragma once

#include <cstdint>
#include <string>

#include "backends/fa/fa_plan.h"

namespace kvfuzz::fa {

struct LocalInput {
  const FaCall& base;                  // rows to split: cu_seqlens_q, cache_seqlens
  const Buffer<int32_t>& block_table;  // what the helper slices (normally base.page_table)
  int32_t block_width = 0;             // its row stride
  int32_t page_size = 1;               // the block table's page size, also the view of the result
  int64_t base_row_capacity = 0;       // base rows captured by the CUDA graph
};

struct LocalOptions {
  bool graph = false;  // allocate at capture capacity
  int32_t max_context_len = 0;
  bool shrink_chunk = false;   // fault fa_local_chunk_shrink
  std::string name = "local";  // buffer prefix
};

FaCall make_local_attention(const LocalInput& in, int32_t chunk, const LocalOptions& opt);

}  // namespace kvfuzz::fa
