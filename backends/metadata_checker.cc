#include "backends/metadata_checker.h"

#include <cctype>

#include "backends/common/harness_error.h"

namespace kvfuzz {

int64_t MetadataChecker::expected_slot(int32_t row, int32_t column, PoolKind pool) const {
  int32_t slot = 0;
  try {
    slot = cache_.r2t(fb_.req_pool_indices[static_cast<size_t>(row)], column);
  } catch (const InputOutOfRange& e) {  // the check, not the backend, asked for a missing entry
    throw HarnessError(std::string("metadata check of row ") + std::to_string(row) + ": " + e.what());
  }
  if (pool == PoolKind::full) return slot;
  return cache_.full_to_swa[static_cast<size_t>(slot)];
}

void MetadataChecker::mismatch(const std::string& table, int64_t entry, int64_t got, int32_t layer, int32_t row,
                               int32_t column, int32_t r2t_column) {
  const PoolKind pool = pool_of(s_, layer);
  const int64_t want = expected_slot(row, r2t_column, pool);
  if (got == want) return;
  const std::string held = r2t_column == column ? "" : " (req_to_token column " + std::to_string(r2t_column) + ")";
  const int32_t request = fb_.request_ids[static_cast<size_t>(row)];
  // The table's own name without the mode and the numbers ("extend.local18.local_block_table" ->
  // "local_block_table") and what the slot is: a full-pool slot where the SWA one belongs, or wrong.
  std::string kind = table.substr(table.rfind('.') == std::string::npos ? 0 : table.rfind('.') + 1);
  const bool untranslated = pool == PoolKind::swa && got == expected_slot(row, r2t_column, PoolKind::full);
  kind += untranslated ? ":untranslated" : own_other_column(row, got, pool) ? ":other-column" : ":wrong-slot";
  add("stride-divide", layer, kind, table + "[" + std::to_string(entry) + "] maps layer " + std::to_string(layer) + ", row " +
                           std::to_string(row) + " (request " + std::to_string(request) + "), key column " +
                           std::to_string(column) + held + " to slot " + std::to_string(got) + "; req_to_token" +
                           (pool == PoolKind::swa ? " -> full_to_swa" : "") + " says slot " + std::to_string(want));
}

bool MetadataChecker::own_other_column(int32_t row, int64_t slot, PoolKind pool) const {
  // The row's own slots in `pool`, gathered once per (row, pool): a wrong table may mismatch every key.
  std::unordered_set<int64_t>& own = own_slots_[{row, pool == PoolKind::full ? 0 : 1}];
  if (own.empty()) {
    const int32_t req = fb_.req_pool_indices[static_cast<size_t>(row)];
    for (int32_t c = 0; c < s_.cache.max_context_len; ++c) {
      int64_t at = 0;
      try {
        at = cache_.r2t(req, c);
      } catch (const InputOutOfRange&) {
        break;
      }
      if (at == 0) continue;  // not allocated (slot 0 is the dummy page)
      own.insert(pool == PoolKind::full ? at : cache_.full_to_swa[static_cast<size_t>(at)]);
    }
    own.insert(-1);  // marks the row as gathered
  }
  return own.count(slot) > 0;
}

void MetadataChecker::add(std::string property, int32_t layer, std::string mechanism, std::string message) {
  // Metadata messages have no mechanism of their own (the fingerprint normalises them): count those
  // per message with its numbers taken out.
  std::string bucket = property + "/" + (mechanism.empty() ? message : mechanism);
  if (mechanism.empty())
    for (char& c : bucket)
      if (std::isdigit(static_cast<unsigned char>(c))) c = 'N';
  if (per_mechanism_[bucket]++ >= kMaxPerMechanism) return;
  findings_.push_back({std::move(property), std::move(message), layer, std::move(mechanism)});
}

}  // namespace kvfuzz
