#include "backends/contract/batch_merge.h"

#include <cstdio>
#include <stdexcept>

namespace kvfuzz::batch {

std::vector<int64_t> starts(const std::vector<int64_t>& counts) {
  std::vector<int64_t> s;
  int64_t at = 0;
  for (int64_t n : counts) {
    s.push_back(at);
    at += n;
  }
  return s;
}

std::vector<int64_t> token_offsets(const std::vector<BatchCase>& cases) {
  std::vector<int64_t> t;
  for (const BatchCase& c : cases) t.push_back(c.token_offset);
  return t;
}

std::vector<int64_t> slot_offsets(const std::vector<BatchCase>& cases, PoolKind pool) {
  std::vector<int64_t> s;
  for (const BatchCase& c : cases) s.push_back(pool == PoolKind::swa ? c.swa_slot_offset : c.full_slot_offset);
  return s;
}

std::vector<int64_t> page_offsets(const std::vector<BatchCase>& cases, PoolKind pool, int32_t page_size) {
  std::vector<int64_t> pages = slot_offsets(cases, pool);
  for (int64_t& p : pages) {
    // Pools hold whole pages (page 0 included), so every case's pool starts on a page.
    if (page_size <= 0 || p % page_size != 0)
      throw std::logic_error("batch: pool offset " + std::to_string(p) + " is not a whole number of pages of " +
                             std::to_string(page_size));
    p /= page_size;
  }
  return pages;
}

std::string sinks_shape(const std::vector<double>& sinks) {
  std::string shape = sinks.empty() ? "" : " sinks";
  char value[32];
  for (double v : sinks) {
    std::snprintf(value, sizeof value, " %a", v);
    shape += value;
  }
  return shape;
}

std::string layer_shape(const Layer& l) {
  return to_string(l.kind) + "/" + std::to_string(l.window) + "/" + std::to_string(l.chunk);
}

void copy_table_row(Buffer<int32_t>& batch_table, int64_t at, int32_t batch_width, const Buffer<int32_t>& table,
                    int64_t from, int32_t width, int64_t add) {
  for (int32_t k = 0; k < batch_width; ++k)
    batch_table.set(at + k, static_cast<int32_t>(add + (k < width ? table[from + k] : 0)));
}

}  // namespace kvfuzz::batch
