// The cache simulator: replays an allocator history into production-shaped cache state.
//
// Where it sits: scenario -> **cache** -> planner. It turns the history into what a serving
// engine holds when the batch arrives — req_to_token, the full->SWA slot mapping, which slot holds
// which logical token — with the allocation rules of sglang's mem_cache (reference/CONVENTIONS.md):
//   - page 0 of each pool is reserved; pages 1.. start free in order;
//   - appending fills the request's partial last page, then takes whole pages, in batch order;
//   - freed pages are reused: LIFO for the paged allocator (page_size > 1), FIFO for the token
//     allocator (page_size 1), or merged sorted when the free list runs short (cache.sort_free,
//     disaggregated serving);
//   - a hybrid model's SWA pool allocates in step with equal in-page offsets; evicted tokens map
//     to SWA slot 0; full_to_swa has one extra last entry, -1;
//   - req_to_token rows come from a FIFO of rows 1..max_requests; row 0 stays zero for padding;
//     a freed row keeps its stale entries.
//   - a `share` op points a new request's first columns at another's prefix slots (whole pages),
//     which stay allocated while any holder lives (sglang's radix cache, vLLM's prefix caching);
// It records the logical content of each slot (request, column) so that pools can be filled from
// the value source and reads can be attributed; a shared slot names one of its holders, whose
// column holds the same K/V (shared_prefix.h).
//
//   CacheModel cache(scenario.cache, has_swa_pool);
//   for (const Op& op : scenario.history) cache.apply(op, window);
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "reference/allocator.h"
#include "reference/input_out_of_range.h"
#include "reference/scenario.h"

namespace kvfuzz {

// What a physical slot holds: the logical token (request id, column) whose K/V it carries.
struct SlotContent {
  int32_t request = -1;  // -1: no live token
  int32_t column = -1;
  bool written = false;  // allocated but not yet written (a later draft step) holds stale data

  bool live() const { return request >= 0; }
  bool operator==(const SlotContent&) const = default;
};

struct RequestState {
  int32_t row = 0;          // req_to_token row
  int32_t seq_len = 0;      // committed tokens
  int32_t swa_evicted = 0;  // columns [0, swa_evicted) have no SWA slot
  std::vector<int32_t> draft_parents;  // a pending spec-decode tree at columns seq_len..
};

struct CacheState {
  CacheConfig config;
  bool hybrid = false;      // a separate SWA pool exists
  int64_t full_slots = 0;   // page 0 included
  int64_t swa_slots = 0;    // page 0 included; 0 without a pool
  std::vector<int32_t> req_to_token;   // [max_requests + 1][max_context_len]
  std::vector<int64_t> full_to_swa;    // [full_slots + 1], hybrid only; last entry -1
  std::vector<SlotContent> full_content;  // [full_slots]
  std::vector<SlotContent> swa_content;   // [swa_slots]
  std::map<int32_t, RequestState> requests;  // live requests by id

  int32_t& r2t(int32_t row, int32_t column) {
    return req_to_token[static_cast<size_t>(row) * config.max_context_len + column];
  }
  // Checked: a planner that reads past a row (into the next request's) is caught, as an index
  // error would be in production; throws InputOutOfRange naming req_to_token.
  int32_t r2t(int32_t row, int32_t column) const {
    if (row < 0 || row > config.max_requests || column < 0 || column >= config.max_context_len)
      throw InputOutOfRange("req_to_token", "req_to_token[" + std::to_string(row) + "][" + std::to_string(column) +
                                                "] is outside its " + std::to_string(config.max_requests + 1) +
                                                " x " + std::to_string(config.max_context_len) + " entries");
    return req_to_token[static_cast<size_t>(row) * config.max_context_len + column];
  }
};

// A request that receives `count` new tokens at req_to_token columns [first_column, ..).
struct Append {
  int32_t request = 0;
  int32_t first_column = 0;
  int32_t count = 0;
};

class CacheModel {
 public:
  CacheModel(const CacheConfig& config, bool hybrid);

  // Applies one history op. `max_window` is the largest sliding-window radius of the model (for
  // swa_evict). Throws InvalidCase("history[index]: ...") when the op is not possible here.
  void apply(const Op& op, int32_t max_window, size_t index);

  // Allocates slots for several requests in one go, as alloc_extend does for a batch: pages are
  // taken in request order, columns get req_to_token entries, slots get their content. Returns
  // false when a pool is exhausted (nothing is taken then).
  bool append(std::span<const Append> appends, bool written = true);

  // Drops the tokens at `columns` of a request and releases pages that no longer hold any live
  // token, in ascending page order (free() of sglang frees whole pages).
  void drop(int32_t request, std::span<const int32_t> columns);

  // Points a column at another slot of the same request and relabels the slot's content.
  void remap(int32_t request, int32_t column, int32_t slot);

  // Marks the content of a slot (duplicated pages, KV moves).
  void set_content(int64_t slot, SlotContent content);

  // Pages the pools could still hand out (free and released).
  int32_t available_full_pages() const { return full_alloc_.available(); }
  int32_t available_swa_pages() const { return swa_alloc_.available(); }

  const CacheState& state() const { return state_; }
  CacheState& state() { return state_; }
  RequestState& request(int32_t id, size_t index);  // throws when not live

 private:
  void release_full(std::vector<int32_t> pages);
  void release_swa(std::vector<int32_t> pages);

  CacheState state_;
  PageAllocator full_alloc_, swa_alloc_;
  void share(const Op& op, size_t index);

  std::vector<int32_t> full_refs_, swa_refs_;  // live tokens per page
  // Full-pool slots that several live requests hold (share ops): their holders, the slot's content
  // naming the first; a slot leaves the map when one holder is left.
  std::unordered_map<int64_t, std::vector<int32_t>> holders_;
  std::vector<int32_t> free_rows_;             // FIFO
  size_t row_head_ = 0;
};

// The largest sliding-window radius among the model's layers (0 if none).
int32_t max_window(const Model& m);

}  // namespace kvfuzz
