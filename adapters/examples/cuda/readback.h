// Device-to-host copies of one layer's results, queued on the thread's default stream (built with
// --default-stream per-thread: its own stream) into pinned host memory and read after one
// synchronization of that stream, instead of one blocking cudaMemcpy each: with several worker
// processes or lanes on one GPU, every blocking copy waits for the others' work too.
//
// Where it sits: used by page_table_executor.cu at the end of each layer, for the guard zones of
// every DeviceBuffer (device_buffer.h), the kernels' key errors and the outputs. Grow-only, one per
// thread (kvfuzz-worker calls each thread's requests one at a time; lanes run on several threads).
// An error a wait finds is reported there; one that is sticky (an illegal address) poisons the
// context for every thread, whose requests then fail too (kvfuzz restarts the server).
//
//   Readback& r = Readback::of_thread();
//   check(r.begin(total_bytes), "cudaMallocHost");   // nothing of this thread's may be in flight
//   const size_t at = r.queue(device_ptr, bytes);     // cudaMemcpyAsync into the pinned buffer
//   check(r.wait(), "cudaStreamSynchronize");
//   const unsigned char* host = r.at(at);
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace kvfuzz_cuda {

class Readback {
 public:
  Readback() = default;
  Readback(const Readback&) = delete;
  Readback& operator=(const Readback&) = delete;
  ~Readback() { cudaFreeHost(base_); }  // at exit; an error (the runtime unloading) is ignored

  static Readback& of_thread() {
    static thread_local Readback r;
    return r;
  }

  // Room for `bytes` of copies; the previous ones must be done (after wait()).
  cudaError_t begin(size_t bytes) {
    used_ = 0;
    error_ = cudaSuccess;
    if (bytes <= capacity_) return cudaSuccess;
    cudaFreeHost(base_);
    base_ = nullptr, capacity_ = 0;
    if (const cudaError_t e = cudaMallocHost(&base_, bytes); e != cudaSuccess) return e;
    capacity_ = bytes;
    return cudaSuccess;
  }

  // Queues a copy of `bytes` from `device`; returns where it lands (for at()). Copies past the
  // room begun are not queued and make wait() fail.
  size_t queue(const void* device, size_t bytes) {
    const size_t at = used_;
    if (used_ + bytes > capacity_) {
      error_ = cudaErrorInvalidValue;
      return at;
    }
    if (const cudaError_t e =
            cudaMemcpyAsync(static_cast<unsigned char*>(base_) + at, device, bytes, cudaMemcpyDeviceToHost);
        e != cudaSuccess && error_ == cudaSuccess)
      error_ = e;
    used_ += (bytes + 15) / 16 * 16;
    return at;
  }

  // Waits for this thread's stream only: other threads' kernels run on.
  cudaError_t wait() {
    const cudaError_t e = cudaStreamSynchronize(cudaStreamPerThread);
    return e != cudaSuccess ? e : error_;
  }

  const unsigned char* at(size_t offset) const { return static_cast<const unsigned char*>(base_) + offset; }

  // Room a queue of `bytes` takes.
  static size_t room(size_t bytes) { return (bytes + 15) / 16 * 16; }

 private:
  void* base_ = nullptr;
  size_t capacity_ = 0, used_ = 0;
  cudaError_t error_ = cudaSuccess;
};

}  // namespace kvfuzz_cuda
