// Device buffers with sentinel guard zones for the CUDA example executors, in blocks of the
// process's DevicePool (device_pool.h), and CUDA API errors as exceptions that name the call.
//
// Where it sits: used by adapters/examples/cuda/page_table_executor.cu. kvfuzz-worker guards the
// host arrays it hands an executor; the device copies are the executor's own, so it guards them
// itself: kGuardBytes of kGuardByte before and after each buffer, read back after the kernels
// (readback.h) and checked (check_guards throws a Failure naming the array and the first changed
// byte). Nothing here blocks: the copies to the device are queued on the thread's default stream
// (from pageable memory the runtime stages them at once), the guards' copies back too.
//
//   DevicePool::of_thread().restart();           // a new request: the last one's buffers are done
//   DeviceBuffer q("q", host_q, bytes);          // guarded device copy of host_q (nullptr: no copy)
//   kernel<<<...>>>(q.as<float>());
//   Readback& r = Readback::of_thread();
//   check(r.begin(DeviceBuffer::kGuardRoom), "cudaMallocHost");
//   const size_t at = q.queue_guards(r);
//   check(r.wait(), "cudaStreamSynchronize");
//   q.check_guards(r.at(at));
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "adapters/examples/cuda/device_pool.h"
#include "adapters/examples/cuda/readback.h"

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
    check(DevicePool::of_thread().take(bytes_ + 2 * kGuardBytes, &base_), "cudaMalloc of " + name_);
    check(cudaMemsetAsync(base_, kGuardByte, bytes_ + 2 * kGuardBytes), "cudaMemsetAsync of the guards of " + name_);
    if (host && bytes_ > 0)
      check(cudaMemcpyAsync(data(), host, bytes_, cudaMemcpyHostToDevice),
            "cudaMemcpyAsync of " + name_ + " to the device");
  }
  // Readback room the guards of one buffer take.
  static constexpr size_t kGuardRoom = 2 * kGuardBytes;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return static_cast<unsigned char*>(base_) + kGuardBytes; }
  template <class T>
  T* as() const { return static_cast<T*>(data()); }

  // Queues the read-back of both guard zones; returns where they land (check_guards' argument).
  size_t queue_guards(Readback& r) const {
    const size_t at = r.queue(base_, kGuardBytes);
    r.queue(static_cast<const unsigned char*>(base_) + kGuardBytes + bytes_, kGuardBytes);
    return at;
  }

  // Throws a Failure naming the buffer if a kernel wrote into either guard zone: `guards` is what
  // queue_guards read back, after the Readback's wait().
  void check_guards(const unsigned char* guards) const {
    for (int side = 0; side < 2; ++side) {
      const unsigned char* guard = guards + side * Readback::room(kGuardBytes);
      for (size_t i = 0; i < kGuardBytes; ++i)
        if (guard[i] != kGuardByte)
          throw Failure("device buffer " + name_ + " (" + std::to_string(bytes_) + " bytes): its guard zone " +
                        (side == 0 ? "before" : "after") + " it was overwritten at byte " + std::to_string(i) +
                        (side == 0 ? " of the " + std::to_string(kGuardBytes) + " before it" : " past its end"));
    }
  }

  size_t bytes() const { return bytes_; }

 private:
  std::string name_;
  size_t bytes_;
  void* base_ = nullptr;
};

}  // namespace kvfuzz_cuda
