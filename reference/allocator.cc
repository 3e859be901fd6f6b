#include "reference/allocator.h"

#include <algorithm>

namespace kvfuzz {

FreePolicy free_policy(int32_t page_size, bool sort_free) {
  if (sort_free) return FreePolicy::sorted;
  return page_size == 1 ? FreePolicy::fifo : FreePolicy::lifo;
}

PageAllocator::PageAllocator(int32_t num_pages, FreePolicy policy) : policy_(policy) {
  for (int32_t p = 1; p <= num_pages; ++p) free_.push_back(p);
}

bool PageAllocator::take(int32_t count, std::vector<int32_t>& out) {
  if (count <= 0) return true;
  if (static_cast<size_t>(count) > free_.size()) merge_and_sort();
  if (static_cast<size_t>(count) > free_.size()) return false;
  out.insert(out.end(), free_.begin(), free_.begin() + count);
  free_.erase(free_.begin(), free_.begin() + count);
  return true;
}

void PageAllocator::release(std::span<const int32_t> pages) {
  switch (policy_) {
    case FreePolicy::fifo: free_.insert(free_.end(), pages.begin(), pages.end()); break;
    case FreePolicy::sorted: released_.insert(released_.end(), pages.begin(), pages.end()); break;
    case FreePolicy::lifo: {
      std::vector<int32_t> unique(pages.begin(), pages.end());
      std::sort(unique.begin(), unique.end());
      unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
      free_.insert(free_.begin(), unique.begin(), unique.end());
      break;
    }
  }
}

int32_t PageAllocator::available() const { return static_cast<int32_t>(free_.size() + released_.size()); }

void PageAllocator::merge_and_sort() {
  if (released_.empty()) return;
  free_.insert(free_.end(), released_.begin(), released_.end());
  released_.clear();
  std::sort(free_.begin(), free_.end());
}

}  // namespace kvfuzz
