// Device memory reused across requests by the CUDA example executors: grow-only blocks, freed at
// exit, so a request pays for its copies and kernels, not for cudaMalloc and cudaFree (which
// synchronizes the device) of every buffer.
//
// Where it sits: under DeviceBuffer (device_buffer.h). A request's n-th buffer takes the pool's
// n-th block, enlarged (freed and allocated again) only when it is too small; restart() begins
// the next request's count, once the previous buffers are no longer used. One pool per thread:
// kvfuzz-worker calls a thread-safe executor on several threads at once (a server's lanes), each
// thread one request at a time on its own stream, so a thread's pool serves its calls.
// KVFUZZ_CUDA_EXACT_BUFFERS=1 (ci/gpu.sh's compute-sanitizer campaign) allocates every block at
// exactly its buffer's size, so a read past a buffer's guard zone leaves the allocation and
// memcheck reports it, as with one cudaMalloc per buffer.
//
//   DevicePool& pool = DevicePool::of_thread();
//   pool.restart();                          // the buffers of the last request are done with
//   void* block;
//   check(pool.take(bytes, &block), "cudaMalloc of q");   // at least `bytes`, uninitialised
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

namespace kvfuzz_cuda {

class DevicePool {
 public:
  explicit DevicePool(bool exact) : exact_(exact) {}
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;
  ~DevicePool() {
    // At exit; an error (the runtime already unloading: the process's end frees the memory) is ignored.
    for (const Block& b : blocks_) cudaFree(b.base);
  }

  // The calling thread's pool (freed at the thread's exit).
  static DevicePool& of_thread() {
    static thread_local DevicePool pool(std::getenv("KVFUZZ_CUDA_EXACT_BUFFERS") != nullptr &&
                                        std::string(std::getenv("KVFUZZ_CUDA_EXACT_BUFFERS")) == "1");
    return pool;
  }

  void restart() { next_ = 0; }

  // *block = the next block, of at least `bytes`; the error of cudaMalloc when it had to grow and
  // could not (that block is left empty, to be allocated again by a later request).
  cudaError_t take(size_t bytes, void** block) {
    if (next_ == blocks_.size()) blocks_.emplace_back();
    Block& b = blocks_[next_];
    if (b.capacity < bytes || (exact_ && b.capacity != bytes)) {
      void* grown = nullptr;
      cudaFree(b.base);  // its last user, this thread's finished request, is done with it
      b = Block{};
      if (const cudaError_t e = cudaMalloc(&grown, bytes); e != cudaSuccess) return e;
      b = Block{grown, bytes};
    }
    ++next_;
    *block = b.base;
    return cudaSuccess;
  }

 private:
  struct Block {
    void* base = nullptr;
    size_t capacity = 0;
  };
  bool exact_;  // every block exactly its buffer's size
  std::vector<Block> blocks_;
  size_t next_ = 0;
};

}  // namespace kvfuzz_cuda
