// A metadata buffer that knows its capacity and checks every access against it.
//
// Where it sits: planners write their metadata (page tables, CSR arrays, seqlens, masks) into
// Buffers; executors read them through operator[]. An index outside [0, capacity) throws a
// Violation naming the buffer, the index and the capacity, instead of reading or corrupting
// memory. Guard zones of a canary pattern before and after the data catch writes through raw
// pointers (data()); check_guards() runs after planning and after execution.
//
// CUDA-graph buffers are allocated once at capture with their worst-case capacity and then
// refilled at replay: a planner that sizes a buffer in pages and fills it per token is caught
// here (sglang #24587).
//
//   Buffer<int32_t> page_table("page_table", bs * max_pages);
//   page_table.set(i, page);          // checked write
//   int32_t p = page_table[i];        // checked read
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backends/common/violation.h"

namespace kvfuzz {

template <class T>
class Buffer {
 public:
  static constexpr int64_t kGuard = 16;  // elements of canary on each side

  Buffer() : Buffer("unnamed", 0) {}
  Buffer(std::string name, int64_t capacity, T fill = T{}) : name_(std::move(name)), capacity_(capacity) {
    if (capacity < 0) throw Violation(name_, "negative capacity " + std::to_string(capacity));
    storage_.resize(static_cast<size_t>(capacity + 2 * kGuard));
    std::memset(static_cast<void*>(storage_.data()), kCanary, sizeof(T) * static_cast<size_t>(kGuard));
    std::memset(static_cast<void*>(storage_.data() + kGuard + capacity), kCanary, sizeof(T) * static_cast<size_t>(kGuard));
    for (int64_t i = 0; i < capacity; ++i) storage_[static_cast<size_t>(kGuard + i)] = fill;
  }

  const std::string& name() const { return name_; }
  int64_t capacity() const { return capacity_; }

  const T& operator[](int64_t i) const {
    check(i, "read");
    return storage_[static_cast<size_t>(kGuard + i)];
  }
  void set(int64_t i, T value) {
    check(i, "write");
    storage_[static_cast<size_t>(kGuard + i)] = value;
  }

  // Raw access for bulk copies; overruns are found by check_guards().
  T* data() { return storage_.data() + kGuard; }
  const T* data() const { return storage_.data() + kGuard; }

  void check_guards() const {
    const auto* bytes = reinterpret_cast<const unsigned char*>(storage_.data());
    const size_t guard_bytes = sizeof(T) * static_cast<size_t>(kGuard);
    const size_t tail = sizeof(T) * static_cast<size_t>(kGuard + capacity_);
    for (size_t b = 0; b < guard_bytes; ++b) {
      if (bytes[b] != kCanary) throw Violation(name_, "guard zone before the buffer was overwritten");
      if (bytes[tail + b] != kCanary)
        throw Violation(name_, "guard zone after the buffer was overwritten (capacity " + std::to_string(capacity_) + ")");
    }
  }

  // The elements [0, n) as a vector, for comparisons and reports.
  std::vector<T> prefix(int64_t n) const {
    if (n <= 0) return {};
    check(n - 1, "read");
    return std::vector<T>(data(), data() + n);
  }

 private:
  static constexpr unsigned char kCanary = 0xA5;

  void check(int64_t i, const char* what) const {
    if (i < 0 || i >= capacity_)
      throw Violation(name_, std::string(what) + " at index " + std::to_string(i) + ", outside its capacity " +
                                 std::to_string(capacity_));
  }

  std::string name_;
  int64_t capacity_ = 0;
  std::vector<T> storage_;
};

}  // namespace kvfuzz
