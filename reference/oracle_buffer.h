// An uninitialised, 64-byte aligned array: the oracle's materialised tensors and kernel scratch.
//
// Where it sits: under the oracle's materialise step (oracle_materialise.h) and kernel
// (oracle_kernel.cc). Unlike std::vector it does not zero its memory, so a large K/V array is
// first touched by the threads that fill it, in parallel, not by one memset; and `ensure` reuses
// it, so the next layer's K/V does not fault its pages in again.
//
//   AlignedBuffer<float> k(n);   // k[0 .. n) hold garbage until written
//   k.ensure(m);                 // room for m, reallocating only if m > the capacity
#pragma once

#include <cstddef>
#include <memory>
#include <new>

namespace kvfuzz {

template <typename T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n)
      : size_(n), capacity_(n), data_(n == 0 ? nullptr : static_cast<T*>(::operator new[](n * sizeof(T), kAlign))) {}

  // Makes room for n elements, keeping the memory (and its mapped pages) when it is enough;
  // the contents are garbage either way.
  void ensure(size_t n) {
    if (n > capacity_) {
      data_.reset();  // before allocating, so the old and new never coexist
      size_ = capacity_ = 0;
      *this = AlignedBuffer(n);
    }
    size_ = n;
  }

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_.get()[i]; }
  const T& operator[](size_t i) const { return data_.get()[i]; }

 private:
  static constexpr std::align_val_t kAlign{64};
  struct Free {
    void operator()(T* p) const { ::operator delete[](p, kAlign); }
  };
  size_t size_ = 0;
  size_t capacity_ = 0;
  std::unique_ptr<T, Free> data_;
};

}  // namespace kvfuzz
