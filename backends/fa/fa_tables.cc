// See fa_tables.h.
#include "backends/fa/fa_tables.h"

#include <algorithm>

namespace kvfuzz::fa {

FaCall make_call(const std::string& name, const std::string& table_name, int64_t row_capacity, int32_t width,
                 int32_t view_page_size, bool causal) {
  FaCall c;
  c.name = name;
  c.width = width;
  c.view_page_size = view_page_size;
  c.causal = causal;
  c.cu_seqlens_q = Buffer<int32_t>(name + ".cu_seqlens_q", row_capacity + 1);
  c.cu_seqlens_k = Buffer<int32_t>(name + ".cu_seqlens_k", row_capacity + 1);
  c.cache_seqlens = Buffer<int32_t>(name + ".cache_seqlens", row_capacity);
  c.page_table = Buffer<int32_t>(table_name, row_capacity * width);
  return c;
}

void set_row(FaCall& c, int32_t row, int32_t q_begin, int32_t q_len, int32_t k_len) {
  c.cu_seqlens_q.set(row, q_begin);
  c.cu_seqlens_q.set(row + 1, q_begin + q_len);
  c.cache_seqlens.set(row, k_len);
}

void finish_call(FaCall& c, int32_t rows) {
  c.rows = rows;
  c.max_seqlen_q = 0;
  c.max_seqlen_k = 0;
  c.cu_seqlens_k.set(0, 0);
  for (int32_t b = 0; b < rows; ++b) {
    c.cu_seqlens_k.set(b + 1, c.cu_seqlens_k[b] + c.cache_seqlens[b]);
    c.max_seqlen_q = std::max(c.max_seqlen_q, c.q_len(b));
    c.max_seqlen_k = std::max(c.max_seqlen_k, c.cache_seqlens[b]);
  }
}

int64_t translate_slot(const CacheState& cache, int64_t full_slot, bool swa) {
  if (!swa) return full_slot;
  if (full_slot < 0 || full_slot >= static_cast<int64_t>(cache.full_to_swa.size()))
    throw Violation("full_to_swa", "index " + std::to_string(full_slot) + " outside its " +
                                       std::to_string(cache.full_to_swa.size()) + " entries");
  return cache.full_to_swa[static_cast<size_t>(full_slot)];
}

void fill_page_row(Buffer<int32_t>& table, int64_t offset, const CacheState& cache, int32_t r2t_row, int32_t pages,
                   int32_t ps, SlotSpace space) {
  for (int32_t lp = 0; lp < pages; ++lp) {
    const int64_t slot = cache.r2t(r2t_row, lp * ps);
    int64_t page = 0;
    switch (space) {
      case SlotSpace::full:
        page = slot / ps;
        break;
      case SlotSpace::swa:
        page = translate_slot(cache, slot, true) / ps;
        break;
      case SlotSpace::swa_page_ids:
        page = translate_slot(cache, slot / ps, true);
        break;
    }
    table.set(offset + lp, static_cast<int32_t>(page));
  }
}

}  // namespace kvfuzz::fa
