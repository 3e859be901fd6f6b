// The page allocator of one KV pool, as production runs it.
//
// Where it sits: the cache simulator (cache.h) owns one for the full pool and, for hybrid models,
// one for the SWA pool. Page 0 is reserved (padded batch rows write there); pages 1..num_pages
// start free in ascending order and are taken from the front. Freed pages come back by one of
// sglang's three policies (mem_cache/allocator.py):
//   lifo   — PagedTokenToKVPoolAllocator: free() prepends the freed pages, sorted and unique;
//   fifo   — TokenToKVPoolAllocator (page size 1): free() appends them in the order given;
//   sorted — need_sort: they wait on a release list, merged in and sorted only when a request
//            does not fit in the free list (merge_and_sort_free).
// So tables become non-monotonic once requests finish and their pages are reused.
//
//   PageAllocator a(/*num_pages=*/16, FreePolicy::lifo);
//   std::vector<int32_t> pages;
//   if (!a.take(3, pages)) { /* pool exhausted */ }
//   a.release({pages[1]});
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace kvfuzz {

enum class FreePolicy : uint8_t { lifo, fifo, sorted };

class PageAllocator {
 public:
  PageAllocator(int32_t num_pages, FreePolicy policy);

  // Appends `count` pages to `out`, or returns false (and takes nothing) when the pool is short.
  bool take(int32_t count, std::vector<int32_t>& out);

  // Returns pages to the pool by the allocator's policy.
  void release(std::span<const int32_t> pages);

  int32_t available() const;  // free + released

 private:
  void merge_and_sort();

  FreePolicy policy_;
  std::deque<int32_t> free_;
  std::vector<int32_t> released_;
};

// The policy sglang uses for a pool of this page size.
FreePolicy free_policy(int32_t page_size, bool sort_free);

}  // namespace kvfuzz
