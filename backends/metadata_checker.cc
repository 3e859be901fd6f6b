#include "backends/metadata_checker.h"

namespace kvfuzz {

int64_t MetadataChecker::expected_slot(int32_t row, int32_t column, PoolKind pool) const {
  const int32_t slot = cache_.r2t(fb_.req_pool_indices[static_cast<size_t>(row)], column);
  if (pool == PoolKind::full) return slot;
  return cache_.full_to_swa[static_cast<size_t>(slot)];
}

void MetadataChecker::mismatch(const std::string& table, int64_t entry, int64_t got, int64_t want, int32_t layer,
                               int32_t row, int32_t column) {
  if (got == want) return;
  add("stride-divide", table + "[" + std::to_string(entry) + "] maps layer " + std::to_string(layer) + ", row " + std::to_string(row) +
       " (request " + std::to_string(fb_.request_ids[static_cast<size_t>(row)]) + "), key column " +
       std::to_string(column) + " to slot " + std::to_string(got) + "; req_to_token" +
       (pool_of(s_, layer) == PoolKind::swa ? " -> full_to_swa" : "") + " says slot " + std::to_string(want));
}

}  // namespace kvfuzz
