// Memory reused across requests by the CUDA example executors: grow-only blocks, freed at exit, so
// a request pays for its copies and kernels, not for cudaMalloc and cudaFree (which synchronizes the
// device) of every buffer. Two pools a thread: device memory for the buffers, pinned host memory
// their host arrays pass through on the way there (a copy from pageable memory is staged by the
// runtime through buffers the process's threads share, and holds the calling thread meanwhile; a
// copy from pinned memory is queued like a kernel).
//
// Where it sits: under DeviceBuffer (device_buffer.h). A request's n-th buffer takes the pool's
// n-th block, enlarged (freed and allocated again) only when it is too small; restart() begins
// the next request's count, once the previous buffers are no longer used. One pool per thread:
// kvfuzz-worker calls a thread-safe executor on several threads at once (a server's lanes), each
// thread one request at a time on its own stream, so a thread's pool serves its calls.
// KVFUZZ_CUDA_EXACT_BUFFERS=1 (ci/gpu.sh's compute-sanitizer campaign) allocates every device block at
// exactly its buffer's size, so a read past a buffer's guard zone leaves the allocation and
// memcheck reports it, as with one cudaMalloc per buffer.
//
//   DevicePool& pool = DevicePool::of_thread();   // DevicePool::staging_of_thread(): pinned host memory
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
  enum class Memory { device, pinned };
  DevicePool(Memory memory, bool exact) : memory_(memory), exact_(exact) {}
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;
  ~DevicePool() {
    // At exit; an error (the runtime already unloading: the process's end frees the memory) is ignored.
    for (const Block& b : blocks_) release(b.base);
  }

  // The calling thread's pool (freed at the thread's exit).
  static DevicePool& of_thread() {
    static thread_local DevicePool pool(Memory::device, std::getenv("KVFUZZ_CUDA_EXACT_BUFFERS") != nullptr &&
                                                            std::string(std::getenv("KVFUZZ_CUDA_EXACT_BUFFERS")) == "1");
    return pool;
  }

  // The calling thread's pinned host blocks, where host arrays wait for their copy to the device.
  static DevicePool& staging_of_thread() {
    static thread_local DevicePool pool(Memory::pinned, false);
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
      release(b.base);  // its last user, this thread's finished request, is done with it
      b = Block{};
      const cudaError_t e = memory_ == Memory::device ? cudaMalloc(&grown, bytes) : cudaMallocHost(&grown, bytes);
      if (e != cudaSuccess) return e;
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
  void release(void* base) const {
    if (memory_ == Memory::device) cudaFree(base);
    else cudaFreeHost(base);
  }

  Memory memory_;
  bool exact_;  // every block exactly its buffer's size
  std::vector<Block> blocks_;
  size_t next_ = 0;
};

}  // namespace kvfuzz_cuda
