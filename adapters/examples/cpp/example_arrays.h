// Typed lookups of a request's metadata arrays for the C++ example executors: by contract name,
// checked for dtype, with their element count; absent or mistyped arrays throw naming the array
// (example_executor.h turns that into the call's error).
//
// Where it sits: between kvfuzz_executor.h's kvfuzz_find_array and the family executors.
//
//   Span<int32_t> cu_q = array<int32_t>(call, "full.parts.0.cu_seqlens_q");
//   Span<uint8_t> mask = optional_array<uint8_t>(call, "groups.0.calls.0.custom_mask");
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "backends/external/kvfuzz_executor.h"

namespace kvfuzz_example {

template <class T>
struct Span {
  const T* data = nullptr;
  int64_t size = 0;
  T operator[](int64_t i) const {
    if (i < 0 || i >= size) throw std::out_of_range("index " + std::to_string(i) + " outside an array of " + std::to_string(size));
    return data[i];
  }
};

template <class T> constexpr int32_t dtype_of();
template <> constexpr int32_t dtype_of<int32_t>() { return KVFUZZ_I32; }
template <> constexpr int32_t dtype_of<int64_t>() { return KVFUZZ_I64; }
template <> constexpr int32_t dtype_of<uint8_t>() { return KVFUZZ_U8; }

// The array `name` of element type T, or an empty span when the plan has none.
template <class T>
Span<T> optional_array(const kvfuzz_call* call, const std::string& name) {
  const kvfuzz_array* a = kvfuzz_find_array(call, name.c_str());
  if (!a) return {};
  if (a->dtype != dtype_of<T>()) throw std::runtime_error("metadata array '" + name + "' has dtype code " + std::to_string(a->dtype));
  return {static_cast<const T*>(a->data), static_cast<int64_t>(a->bytes / sizeof(T))};
}

template <class T>
Span<T> array(const kvfuzz_call* call, const std::string& name) {
  if (!kvfuzz_find_array(call, name.c_str())) throw std::runtime_error("no metadata array '" + name + "'");
  return optional_array<T>(call, name);
}

}  // namespace kvfuzz_example
