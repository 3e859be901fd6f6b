// NumPy .npy arrays: the language-neutral format in which metadata, Q and the K/V pools travel
// between kvfuzz and an out-of-process adapter (backends/contract/PROTOCOL.md).
//
// Where it sits: under the contract (array_set.h). Only what the contract needs: little-endian
// int32, int64, uint8, float16, float32 and float64, C order, format version 1.0.
//
//   NpyArray a = NpyArray::of<int32_t>({rows + 1}, values);
//   write_npy("/dev/shm/kvfuzz-1/cu_seqlens_q.npy", a);
//   NpyArray b = read_npy(path);            // throws ContractError naming the file
//   std::vector<int32_t> v = b.as<int32_t>("cu_seqlens_q");
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kvfuzz {

// An array or message that breaks the contract: wrong dtype, shape, a malformed file.
class ContractError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <class T>
constexpr const char* npy_descr();
template <> constexpr const char* npy_descr<int32_t>() { return "<i4"; }
template <> constexpr const char* npy_descr<int64_t>() { return "<i8"; }
template <> constexpr const char* npy_descr<uint8_t>() { return "|u1"; }
template <> constexpr const char* npy_descr<float>() { return "<f4"; }
template <> constexpr const char* npy_descr<double>() { return "<f8"; }

struct NpyArray {
  std::string descr;            // "<i4", "<i8", "|u1", "<f2", "<f4", "<f8"
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;

  int64_t elements() const;
  size_t item_size() const;

  template <class T>
  static NpyArray of(std::vector<int64_t> shape, const T* data, size_t n) {
    NpyArray a{npy_descr<T>(), std::move(shape), {}};
    a.bytes.resize(n * sizeof(T));
    if (n) std::memcpy(a.bytes.data(), data, n * sizeof(T));
    return a;
  }
  template <class T>
  static NpyArray of(std::vector<int64_t> shape, const std::vector<T>& v) {
    return of<T>(std::move(shape), v.data(), v.size());
  }

  // The elements as T; throws ContractError naming `what` if the dtype is not T's.
  template <class T>
  std::vector<T> as(std::string_view what) const {
    if (descr != npy_descr<T>())
      throw ContractError(std::string(what) + ": dtype " + descr + ", expected " + npy_descr<T>());
    std::vector<T> v(bytes.size() / sizeof(T));
    if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
    return v;
  }
  // Floating-point elements (float16, float32 or float64) widened to float.
  std::vector<float> as_float(std::string_view what) const;
};

std::string encode_npy(const NpyArray& a);
// Throws ContractError naming `what` for anything but a well-formed v1/v2 .npy of a known dtype.
NpyArray decode_npy(std::string_view bytes, std::string_view what);

// Writes `path` through NpyWriter (an existing file is written over in place).
void write_npy(const std::string& path, const NpyArray& a);
NpyArray read_npy(const std::string& path);

// Marks `path`, where it exists, as not written: read_npy then throws "<path>: not written". A
// reused request folder's earlier answer (out.npy, lse.npy) is marked so before the next request,
// in place (its first bytes), where removing it freed its pages and the next answer allocated
// them again.
void mark_npy_unwritten(const std::string& path);

// Writes one .npy file as its payload comes, through a buffer of at most kBuffer bytes, with no
// copy of the whole array: an executor request's pools and tokens are most of the exchange's
// bytes. An existing file is written over in place and cut to the new length, so a request folder
// reused on tmpfs keeps its pages (none freed and allocated again, nothing to unlink).
//
//   NpyWriter w(dir + "/k_cache.0.npy", "<f4", {slots, heads, dim});
//   for (...) w.append(row, width * sizeof(float));
//   w.finish();   // throws std::logic_error unless the payload was the shape's size
class NpyWriter {
 public:
  static constexpr size_t kBuffer = size_t{1} << 18;

  NpyWriter(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape);
  NpyWriter(const NpyWriter&) = delete;
  NpyWriter& operator=(const NpyWriter&) = delete;
  ~NpyWriter();  // without finish (an exception on the way): closed, the file incomplete

  void append(const void* data, size_t bytes);
  void finish();

 private:
  void flush();
  void write_all(const void* data, size_t bytes);
  static std::vector<unsigned char>& spare_buffer();

  std::string path_;
  int fd_ = -1;
  size_t payload_ = 0, appended_ = 0, old_size_ = 0, file_size_ = 0;
  std::vector<unsigned char> buffer_;
};

}  // namespace kvfuzz
