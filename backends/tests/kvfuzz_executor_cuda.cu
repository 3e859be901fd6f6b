// Compiles the executor C ABI (backends/external/kvfuzz_executor.h) with nvcc: a CUDA executor
// includes it in its .cu file. Built when nvcc is found, never run.
#include "backends/external/kvfuzz_executor.h"

__global__ void fill(float* out, int64_t n, float value) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) out[i] = value;
}

KVFUZZ_EXPORT int kvfuzz_executor_run(const kvfuzz_call* call) {
  const kvfuzz_array* table = kvfuzz_find_array(call, "full.parts.0.page_table");
  if (!table) return kvfuzz_fail(call, "no page table");
  float* out = nullptr;
  const int64_t n = static_cast<int64_t>(call->out_bytes / sizeof(float));
  if (cudaMalloc(&out, call->out_bytes) != cudaSuccess) return kvfuzz_fail(call, "cudaMalloc failed");
  fill<<<static_cast<unsigned>((n + 255) / 256), 256>>>(out, n, 0.0f);
  const cudaError_t e = cudaMemcpy(call->out, out, call->out_bytes, cudaMemcpyDeviceToHost);
  cudaFree(out);
  return e == cudaSuccess ? 0 : kvfuzz_fail(call, "%s", cudaGetErrorString(e));
}
