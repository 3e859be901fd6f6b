// Device buffers with sentinel guard zones for the CUDA example executors, in blocks of the
// process's DevicePool (device_pool.h), and CUDA API errors as exceptions that name the call.
//
// Where it sits: used by adapters/examples/cuda/page_table_executor.cu. kvfuzz-worker guards the
// host arrays it hands an executor; the device copies are the executor's own, so it guards them
// itself: kGuardBytes of kGuardByte before and after each buffer, checked after the kernels
// (check_guards throws a Failure naming the array and the first changed byte).
//
//   DevicePool::process().restart();             // a new request: the last one's buffers are done
//   DeviceBuffer q("q", host_q, bytes);          // guarded device copy of host_q (nullptr: no copy)
//   kernel<<<...>>>(q.as<float>());
//   kvfuzz_cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
//   q.check_guards();
//   out.copy_to(host_out);
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "adapters/examples/cuda/device_pool.h"

namespace kvfuzz_cuda {

// A failed run: its message becomes the call's error (kvfuzz_fail).
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws a Failure naming `what` (the CUDA call) unless `e` is cudaSuccess.
inline void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw Failure(what + " failed: " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

inline constexpr size_t kGuardBytes = 256;  // keeps the payload 256-byte aligned
inline constexpr unsigned char kGuardByte = 0xA5;

// Valid until the pool's next restart(), which must come after the buffer's last use.
class DeviceBuffer {
 public:
  DeviceBuffer(std::string name, const void* host, size_t bytes) : name_(std::move(name)), bytes_(bytes) {
    check(DevicePool::process().take(bytes_ + 2 * kGuardBytes, &base_), "cudaMalloc of " + name_);
    check(cudaMemset(base_, kGuardByte, bytes_ + 2 * kGuardBytes), "cudaMemset of the guards of " + name_);
    if (host && bytes_ > 0)
      check(cudaMemcpy(data(), host, bytes_, cudaMemcpyHostToDevice), "cudaMemcpy of " + name_ + " to the device");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return static_cast<unsigned char*>(base_) + kGuardBytes; }
  template <class T>
  T* as() const { return static_cast<T*>(data()); }

  // Throws a Failure naming the buffer if a kernel wrote into either guard zone.
  void check_guards() const {
    std::vector<unsigned char> guard(kGuardBytes);
    for (int side = 0; side < 2; ++side) {
      const unsigned char* at = static_cast<const unsigned char*>(base_) + (side == 0 ? 0 : kGuardBytes + bytes_);
      check(cudaMemcpy(guard.data(), at, kGuardBytes, cudaMemcpyDeviceToHost), "cudaMemcpy of the guards of " + name_);
      for (size_t i = 0; i < kGuardBytes; ++i)
        if (guard[i] != kGuardByte)
          throw Failure("device buffer " + name_ + " (" + std::to_string(bytes_) + " bytes): its guard zone " +
                        (side == 0 ? "before" : "after") + " it was overwritten at byte " + std::to_string(i) +
                        (side == 0 ? " of the " + std::to_string(kGuardBytes) + " before it" : " past its end"));
    }
  }

  void copy_to(void* host) const {
    if (bytes_ > 0) check(cudaMemcpy(host, data(), bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy of " + name_ + " to the host");
  }

 private:
  std::string name_;
  size_t bytes_;
  void* base_ = nullptr;
};

}  // namespace kvfuzz_cuda
