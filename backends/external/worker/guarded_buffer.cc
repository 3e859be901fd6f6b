// See guarded_buffer.h.
#include "backends/external/worker/guarded_buffer.h"

#include <cstring>

namespace kvfuzz::worker {

GuardedBuffer::GuardedBuffer(std::string name, size_t size)
    : name_(std::move(name)), size_(size), base_(new unsigned char[size + 2 * kGuardBytes]) {
  std::memset(base_.get(), kSentinel, kGuardBytes);
  std::memset(base_.get() + kGuardBytes + size_, kSentinel, kGuardBytes);
}

GuardedBuffer::GuardedBuffer(std::string name, std::vector<unsigned char> bytes)
    : GuardedBuffer(std::move(name), bytes.size()) {
  if (size_) std::memcpy(data(), bytes.data(), size_);
  original_ = std::move(bytes);
  input_ = true;
}

GuardedBuffer::GuardedBuffer(std::string name, size_t size, unsigned char fill) : GuardedBuffer(std::move(name), size) {
  std::memset(data(), fill, size_);
}

std::vector<std::string> GuardedBuffer::violations() const {
  std::vector<std::string> found;
  static const std::vector<unsigned char> sentinels(kGuardBytes, kSentinel);
  auto intact = [](const unsigned char* p) { return std::memcmp(p, sentinels.data(), kGuardBytes) == 0; };
  if (!intact(base_.get())) found.push_back(name_ + ": the guard zone before the array was overwritten");
  if (!intact(data() + size_)) found.push_back(name_ + ": the guard zone after the array was overwritten");
  if (input_ && size_ && std::memcmp(data(), original_.data(), size_) != 0) {
    size_t changed = 0;
    for (size_t i = 0; i < size_; ++i) changed += data()[i] != original_[i];
    found.push_back(name_ + ": an input was written (" + std::to_string(changed) + " bytes changed)");
  }
  return found;
}

}  // namespace kvfuzz::worker
