// Building blocks of every fa table: allocating a call's buffers, filling its rows, and the
// req_to_token -> page table step (stride, then divide; SWA: translate the token slot first).
//
// Where it sits: used by the fa planner (fa_planner.cc, fa_spec_verify.cc, fa_spec_draft.cc,
// fa_local.cc) only. Eager
// batches allocate exact sizes; CUDA-graph batches allocate the capture-time capacity
// (flashattention_backend.py init_cuda_graph_state) and fill the rows of this replay.
//
//   FaCall c = make_call("decode", "decode.page_table", rows, width, ps, /*causal=*/true);
//   set_row(c, b, q_begin, q_len, k_len);
//   fill_page_row(c.page_table, int64_t{b} * c.width, cache, r2t_row, pages, ps, SlotSpace::full);
//   finish_call(c, rows);
#pragma once

#include <cstdint>
#include <string>

#include "backends/fa/fa_plan.h"
#include "reference/cache.h"

namespace kvfuzz::fa {

// Buffers named "<name>.cu_seqlens_q" etc.; the page table gets `table_name`.
FaCall make_call(const std::string& name, const std::string& table_name, int64_t row_capacity, int32_t width,
                 int32_t view_page_size, bool causal);

// Row `row` reads queries [q_begin, q_begin + q_len) of the batch and k_len keys.
void set_row(FaCall& c, int32_t row, int32_t q_begin, int32_t q_len, int32_t k_len);

// Closes a call after its `rows` rows are set: cu_seqlens_k, max_seqlen_q, max_seqlen_k.
void finish_call(FaCall& c, int32_t rows);

// Where a table's entries point.
enum class SlotSpace : uint8_t {
  full,          // full-pool slots / pages
  swa,           // full_to_swa[token slot], then divided: sglang's translate, then // ps
  swa_page_ids,  // full_to_swa[page id]: fault fa_swa_page_id_translate (#16267)
};

// full_to_swa[full_slot] for swa, the slot itself for full. Throws Violation outside the mapping.
int64_t translate_slot(const CacheState& cache, int64_t full_slot, bool swa);

// table[offset + lp] = R2T[r2t_row][lp * ps] / ps for lp < pages, in `space`.
void fill_page_row(Buffer<int32_t>& table, int64_t offset, const CacheState& cache, int32_t r2t_row, int32_t pages,
                   int32_t ps, SlotSpace space);

inline int32_t ceil_div(int64_t a, int64_t b) { return static_cast<int32_t>((a + b - 1) / b); }

}  // namespace kvfuzz::fa
