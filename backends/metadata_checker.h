// Shared checks of planner metadata against the cache: stride/divide invariance and extents.
//
// Where it sits: each Plan's check_metadata() walks its own tables and calls these helpers; the
// property suite supplies `visible` (which columns a query of a layer may see, from the logical
// view) and collects the findings. Planners never see the visibility rule itself.
//
//   check.page_table_row(page_table, row * width, ps, layer, row, first_column, count);
//   check.equal("cache_seqlens[3]", seqlens[3], written_extent);
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <unordered_set>
#include <string>
#include <vector>

#include "backends/common/checked_buffer.h"
#include "backends/common/kv_pools.h"
#include "reference/forward_batch.h"

namespace kvfuzz {

class MetadataChecker {
 public:
  // visible(layer, row, column): whether some query of batch row `row` may see `column` in
  // `layer`. Keys outside every query's visible set (evicted, outside the window) are not checked.
  using Visible = std::function<bool(int32_t layer, int32_t row, int32_t column)>;

  MetadataChecker(const Scenario& s, const CacheState& cache, const ForwardBatch& fb, Visible visible)
      : s_(s), cache_(cache), fb_(fb), visible_(std::move(visible)) {}

  const Scenario& scenario() const { return s_; }
  const ForwardBatch& batch() const { return fb_; }
  // Whether some query of batch row `row` may see logical column `column` in `layer`.
  bool visible(int32_t layer, int32_t row, int32_t column) const { return visible_(layer, row, column); }

  // The slot req_to_token column `column` of batch row `row` occupies in `pool`: req_to_token,
  // then full_to_swa for the SWA pool.
  int64_t expected_slot(int32_t row, int32_t column, PoolKind pool) const;

  // Stride/divide invariance for one page-granular row: key k (0 <= k < count) of the row is
  // column first_column + k, and must resolve to expected_slot() through
  // table[row_offset + k / page_size] * page_size + k % page_size.
  template <class T>
  void page_table_row(const Buffer<T>& table, int64_t row_offset, int32_t page_size, int32_t layer, int32_t row,
                      int32_t first_column, int32_t count) {
    for (int32_t k = 0; k < count; ++k)
      page_table_key(table, row_offset, page_size, k, layer, row, first_column + k, first_column + k);
  }

  // The same for key `key` of a page-granular row whose logical column is `column` (checked where
  // visible) and which req_to_token holds at `r2t_column`: the two differ for the keys drafting
  // branches keep in their own page regions (reference/draft_layout.h).
  //   check.page_table_key(pt, off, ps, k, layer, row, l.key_logical_column(t, k), l.key_column(t, k, ps));
  template <class T>
  void page_table_key(const Buffer<T>& table, int64_t row_offset, int32_t page_size, int32_t key, int32_t layer,
                      int32_t row, int32_t column, int32_t r2t_column) {
    if (!visible_(layer, row, column)) return;
    const int64_t index = row_offset + key / page_size;
    mismatch(table.name(), index, static_cast<int64_t>(table[index]) * page_size + key % page_size, layer, row,
             column, r2t_column);
  }

  // The same for one token-granular entry: entry `index` of `table` is column `column` (held at
  // req_to_token column `r2t_column`).
  template <class T>
  void token_entry(const Buffer<T>& table, int64_t index, int32_t layer, int32_t row, int32_t column) {
    token_entry(table, index, layer, row, column, column);
  }
  template <class T>
  void token_entry(const Buffer<T>& table, int64_t index, int32_t layer, int32_t row, int32_t column,
                   int32_t r2t_column) {
    if (!visible_(layer, row, column)) return;
    mismatch(table.name(), index, static_cast<int64_t>(table[index]), layer, row, column, r2t_column);
  }

  // The same through a layout descriptor over a gathered buffer (MLA prefill's linear K/V): key
  // `key` of a row is linear entry descriptor[row_offset + key / block_size] * block_size +
  // key % block_size, and linear entry e holds the K/V of slot gather[e]; the key is column
  // `column` of batch row `row`.
  //   check.gathered_key(linear_kv_indices, linear_kv_indptr[i], block_size, kv_indices, k, layer, i, k);
  template <class D, class G>
  void gathered_key(const Buffer<D>& descriptor, int64_t row_offset, int32_t block_size, const Buffer<G>& gather,
                    int32_t key, int32_t layer, int32_t row, int32_t column) {
    if (!visible_(layer, row, column)) return;
    const std::string name = descriptor.name() + " -> " + gather.name();
    const int64_t index = row_offset + key / block_size;
    const int64_t entry = index >= 0 && index < descriptor.capacity()
                              ? static_cast<int64_t>(descriptor[index]) * block_size + key % block_size
                              : -1;
    if (entry < 0 || entry >= gather.capacity()) {
      add("stride-divide", layer, name + ":outside",
          name + ": key column " + std::to_string(column) + " of row " + std::to_string(row) +
                               " (layer " + std::to_string(layer) + ", block size " + std::to_string(block_size) +
                               ") maps to " +
                               (entry < 0 ? descriptor.name() + "[" + std::to_string(index) + "]"
                                          : "linear entry " + std::to_string(entry)) +
                               ", outside the buffer; it must resolve to its req_to_token slot");
      return;
    }
    mismatch(name, index, static_cast<int64_t>(gather[entry]), layer, row, column, column);
  }

  // indptr[i+1] - indptr[i] == lens[i] for i < n, and indptr[0] == 0.
  template <class T>
  void prefix_sums(const Buffer<T>& indptr, const std::vector<int64_t>& lens) {
    equal(indptr.name() + "[0]", static_cast<int64_t>(indptr[0]), 0);
    for (size_t i = 0; i < lens.size(); ++i)
      equal(indptr.name() + "[" + std::to_string(i + 1) + "] - [" + std::to_string(i) + "]",
            static_cast<int64_t>(indptr[static_cast<int64_t>(i) + 1]) - static_cast<int64_t>(indptr[static_cast<int64_t>(i)]),
            lens[i]);
  }

  // `layer`, when the check knows it, names the failing layer in the finding's fingerprint.
  void equal(const std::string& what, int64_t got, int64_t want, int32_t layer = -1) {
    if (got != want)
      fail(what + " is " + std::to_string(got) + ", expected " + std::to_string(want) + (got > want ? " (too large)" : " (too small)"),
           layer);
  }

  // A broken metadata invariant (extent, maximum, prefix sum, range).
  void fail(std::string message, int32_t layer = -1) { add("metadata", layer, "", std::move(message)); }

  struct Item {
    std::string property;  // stride-divide (a table maps a key to the wrong slot) or metadata
    std::string message;
    int32_t layer = -1;     // the layer whose table it is, when the check knows it
    std::string mechanism;  // "swa_page_table:untranslated" (Finding::mechanism); "" for metadata
  };
  const std::vector<Item>& findings() const { return findings_; }

 private:
  static constexpr size_t kMaxPerMechanism = 4;  // a second mechanism is never hidden behind the first
  void add(std::string property, int32_t layer, std::string mechanism, std::string message);
  // Whether `slot` holds another column of batch row `row`'s own request in `pool` (a table that
  // starts at the wrong column, as when local attention reads the whole context's table).
  bool own_other_column(int32_t row, int64_t slot, PoolKind pool) const;
  // A stride-divide finding unless `got` is the slot of req_to_token column `r2t_column`.
  void mismatch(const std::string& table, int64_t entry, int64_t got, int32_t layer, int32_t row, int32_t column,
                int32_t r2t_column);

  const Scenario& s_;
  const CacheState& cache_;
  const ForwardBatch& fb_;
  Visible visible_;
  std::vector<Item> findings_;
  std::map<std::string, size_t> per_mechanism_;
  mutable std::map<std::pair<int32_t, int>, std::unordered_set<int64_t>> own_slots_;  // own_other_column's cache
};

}  // namespace kvfuzz
