// Bytes handed to an executor library inside sentinel guard zones, checked after the call.
//
// Where it sits: kvfuzz-worker (worker_main.cc) copies every array of a request into one of
// these before calling the library (kvfuzz_executor.h), as adapters/kvfuzz_adapter/guarded.py
// does for Python executors. A library that writes before or past an array overwrites a guard;
// one that writes an input changes its bytes. violations() says which, naming the array.
//
//   GuardedBuffer q("q (set s0)", npy.bytes);           // an input: must stay as it was
//   GuardedBuffer out("out (set s0)", n_bytes, 0xff);    // an output: filled, may be written
//   run(q.data(), out.data());
//   std::vector<std::string> bad = q.violations();       // guards, then "an input was written"
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kvfuzz::worker {

inline constexpr size_t kGuardBytes = 4096;
inline constexpr unsigned char kSentinel = 0xA5;

class GuardedBuffer {
 public:
  // An input holding `bytes` (kept as the original); violations() also reports any change.
  GuardedBuffer(std::string name, std::vector<unsigned char> bytes);
  // An output of `size` bytes, each set to `fill`; only the guards are checked.
  GuardedBuffer(std::string name, size_t size, unsigned char fill);

  unsigned char* data() { return base_.get() + kGuardBytes; }
  const unsigned char* data() const { return base_.get() + kGuardBytes; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

  std::vector<std::string> violations() const;

 private:
  GuardedBuffer(std::string name, size_t size);

  std::string name_;
  size_t size_;
  std::unique_ptr<unsigned char[]> base_;  // guard, data, guard
  std::vector<unsigned char> original_;   // inputs only
  bool input_ = false;
};

}  // namespace kvfuzz::worker
