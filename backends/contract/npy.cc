#include "backends/contract/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <sstream>

namespace kvfuzz {
namespace {

size_t descr_size(std::string_view d) {
  if (d == "<i4" || d == "<f4") return 4;
  if (d == "<i8" || d == "<f8") return 8;
  if (d == "|u1" || d == "<u1" || d == "|b1") return 1;
  if (d == "<f2") return 2;
  return 0;
}

float half_to_float(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(frac), -24);
  else if (exp == 31) v = frac ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else v = std::ldexp(static_cast<float>(frac | 0x400), exp - 25);
  return sign ? -v : v;
}

// The value of 'key': ... in a .npy header dict, up to the next top-level comma or brace.
std::string header_field(std::string_view header, std::string_view key, std::string_view what) {
  const std::string quoted = "'" + std::string(key) + "'";
  const size_t at = header.find(quoted);
  if (at == std::string_view::npos) throw ContractError(std::string(what) + ": .npy header has no " + quoted);
  size_t i = header.find(':', at + quoted.size());
  if (i == std::string_view::npos) throw ContractError(std::string(what) + ": malformed .npy header");
  ++i;
  while (i < header.size() && header[i] == ' ') ++i;
  size_t end = i;
  int depth = 0;
  while (end < header.size()) {
    const char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
    ++end;
  }
  return std::string(header.substr(i, end - i));
}

}  // namespace

int64_t NpyArray::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t NpyArray::item_size() const { return descr_size(descr); }

std::vector<float> NpyArray::as_float(std::string_view what) const {
  const int64_t n = elements();
  std::vector<float> v(static_cast<size_t>(n));
  if (descr == "<f4") {
    if (n) std::memcpy(v.data(), bytes.data(), v.size() * 4);
  } else if (descr == "<f8") {
    for (int64_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, bytes.data() + i * 8, 8);
      v[static_cast<size_t>(i)] = static_cast<float>(d);
    }
  } else if (descr == "<f2") {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, bytes.data() + i * 2, 2);
      v[static_cast<size_t>(i)] = half_to_float(h);
    }
  } else {
    throw ContractError(std::string(what) + ": dtype " + descr + ", expected a float array (<f2, <f4 or <f8)");
  }
  return v;
}

namespace {

std::string npy_header(const NpyArray& a) {
  std::ostringstream dict;
  dict << "{'descr': '" << a.descr << "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < a.shape.size(); ++i) dict << a.shape[i] << (a.shape.size() == 1 || i + 1 < a.shape.size() ? "," : "");
  dict << "), }";
  std::string header = dict.str();
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  return out + header;
}

// The length of the magic, version and header-length fields, read from the file's first bytes
// (at least 12 of them, or all there are).
// What mark_npy_unwritten puts over a file's magic.
constexpr std::string_view kUnwritten("\x93UNSET", 6);

size_t npy_prefix(std::string_view b, std::string_view what, size_t* header_len) {
  const std::string w(what);
  if (b.substr(0, kUnwritten.size()) == kUnwritten)
    throw ContractError(w + ": not written (what lies there is an earlier request's, marked unwritten)");
  if (b.size() < 10 || b.substr(0, 6) != std::string_view("\x93NUMPY", 6)) throw ContractError(w + ": not a .npy file");
  const int major = static_cast<unsigned char>(b[6]);
  *header_len = 0;
  if (major == 1) {
    *header_len = static_cast<unsigned char>(b[8]) | static_cast<size_t>(static_cast<unsigned char>(b[9])) << 8;
    return 10;
  }
  if (major == 2 || major == 3) {
    if (b.size() < 12) throw ContractError(w + ": truncated .npy header");
    for (int i = 0; i < 4; ++i) *header_len |= static_cast<size_t>(static_cast<unsigned char>(b[8 + i])) << (8 * i);
    return 12;
  }
  throw ContractError(w + ": unsupported .npy version " + std::to_string(major));
}

// The array the header describes, without its bytes; checks that `payload` bytes hold it.
NpyArray npy_described(std::string_view header, size_t payload, std::string_view what) {
  const std::string w(what);
  NpyArray a;
  std::string descr = header_field(header, "descr", what);
  if (descr.size() < 2 || (descr.front() != '\'' && descr.front() != '"')) throw ContractError(w + ": malformed descr");
  a.descr = descr.substr(1, descr.size() - 2);
  if (a.descr == "<u1" || a.descr == "|b1") a.descr = "|u1";
  if (descr_size(a.descr) == 0)
    throw ContractError(w + ": dtype " + a.descr + " is not one of <i4, <i8, |u1, <f2, <f4, <f8 (little-endian)");
  if (header_field(header, "fortran_order", what) != "False") throw ContractError(w + ": Fortran-order arrays are not accepted");
  const std::string shape = header_field(header, "shape", what);
  if (shape.empty() || shape.front() != '(' || shape.back() != ')') throw ContractError(w + ": malformed shape " + shape);
  std::string digits;
  for (char c : shape.substr(1)) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      digits.push_back(c);
    } else if (!digits.empty()) {
      if (digits.size() > 12) throw ContractError(w + ": shape " + shape + " is too large");
      a.shape.push_back(std::stoll(digits));
      digits.clear();
    }
  }
  const int64_t n = a.elements();
  if (static_cast<uint64_t>(n) * a.item_size() != payload)
    throw ContractError(w + ": shape " + shape + " of " + a.descr + " needs " + std::to_string(n * static_cast<int64_t>(a.item_size())) +
                        " bytes, the file holds " + std::to_string(payload));
  return a;
}

}  // namespace

std::string encode_npy(const NpyArray& a) {
  std::string out = npy_header(a);
  out.append(reinterpret_cast<const char*>(a.bytes.data()), a.bytes.size());
  return out;
}

NpyArray decode_npy(std::string_view b, std::string_view what) {
  size_t header_len = 0;
  const size_t start = npy_prefix(b, what, &header_len);
  if (b.size() < start + header_len) throw ContractError(std::string(what) + ": truncated .npy header");
  NpyArray a = npy_described(b.substr(start, header_len), b.size() - start - header_len, what);
  a.bytes.assign(b.begin() + static_cast<std::ptrdiff_t>(start + header_len), b.end());
  return a;
}

NpyWriter::NpyWriter(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape)
    : path_(path) {
  NpyArray described{descr, shape, {}};
  if (descr_size(descr) == 0) throw std::logic_error(path + ": no .npy dtype " + descr);
  payload_ = static_cast<size_t>(described.elements()) * descr_size(descr);
  const std::string header = npy_header(described);
  buffer_.swap(spare_buffer());  // the thread's, where no other writer holds it
  buffer_.reserve(kBuffer);
  buffer_.assign(header.begin(), header.end());
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd_, &st) == 0) old_size_ = static_cast<size_t>(st.st_size);
}

NpyWriter::~NpyWriter() {
  if (fd_ >= 0) ::close(fd_);
  buffer_.clear();
  if (spare_buffer().capacity() < buffer_.capacity()) spare_buffer().swap(buffer_);  // for the thread's next writer
}

// The buffer of a thread's writers, kept between them: a buffer allocated per file was most of
// a small array's cost.
std::vector<unsigned char>& NpyWriter::spare_buffer() {
  thread_local std::vector<unsigned char> spare;
  return spare;
}

void NpyWriter::write_all(const void* data, size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
    p += n;
    bytes -= static_cast<size_t>(n);
    file_size_ += static_cast<size_t>(n);
  }
}

void NpyWriter::flush() {
  write_all(buffer_.data(), buffer_.size());
  buffer_.clear();
}

void NpyWriter::append(const void* data, size_t bytes) {
  appended_ += bytes;
  if (bytes >= kBuffer / 2) {  // a large piece goes as it lies, after what is buffered
    flush();
    write_all(data, bytes);
    return;
  }
  if (buffer_.size() + bytes > kBuffer) flush();
  const auto* p = static_cast<const unsigned char*>(data);
  buffer_.insert(buffer_.end(), p, p + bytes);
}

void NpyWriter::finish() {
  if (appended_ != payload_)
    throw std::logic_error(path_ + ": " + std::to_string(appended_) + " payload bytes written, the shape needs " +
                           std::to_string(payload_));
  flush();
  // a reused file longer than this array: cut its tail
  if (old_size_ > file_size_ && ftruncate(fd_, static_cast<off_t>(file_size_)) != 0)
    throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
}

void mark_npy_unwritten(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;  // none there
  const ssize_t n = ::pwrite(fd, kUnwritten.data(), kUnwritten.size(), 0);
  ::close(fd);
  if (n != static_cast<ssize_t>(kUnwritten.size())) throw std::runtime_error("cannot write " + path);
}

void write_npy(const std::string& path, const NpyArray& a) {
  NpyWriter w(path, a.descr, a.shape);
  w.append(a.bytes.data(), a.bytes.size());
  w.finish();
}

// Header and payload read as they lie in the file, with no copy of the payload on the way (an
// executor server reads every pool of every request: the exchange's largest cost).
NpyArray read_npy(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ContractError(path + ": missing");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (fstat(fd, &st) != 0) throw ContractError(path + ": cannot be read");
  const auto size = static_cast<size_t>(st.st_size);
  // pread(count) bytes at `at` into `to`: all of them, or ContractError
  auto read_at = [&](void* to, size_t count, size_t at) {
    auto* p = static_cast<char*>(to);
    while (count > 0) {
      const ssize_t n = ::pread(fd, p, count, static_cast<off_t>(at));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw ContractError(path + ": cannot be read");
      p += n;
      at += static_cast<size_t>(n);
      count -= static_cast<size_t>(n);
    }
  };
  std::string prefix(std::min<size_t>(size, 12), '\0');
  read_at(prefix.data(), prefix.size(), 0);
  size_t header_len = 0;
  const size_t start = npy_prefix(prefix, path, &header_len);
  if (size < start + header_len) throw ContractError(path + ": truncated .npy header");
  std::string header(header_len, '\0');
  read_at(header.data(), header_len, start);
  NpyArray a = npy_described(header, size - start - header_len, path);
  a.bytes.resize(size - start - header_len);
  read_at(a.bytes.data(), a.bytes.size(), start + header_len);
  return a;
}

}  // namespace kvfuzz
