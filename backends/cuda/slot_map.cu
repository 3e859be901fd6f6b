#include <cuda_runtime.h>

#include <stdexcept>

#include "backends/common/paged_view.h"
#include "backends/cuda/slot_map.h"

namespace kvfuzz {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

__global__ void slots_kernel(const int32_t* table, int32_t rows, int32_t width, int32_t keys, int32_t page_size,
                             int64_t* slots) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(rows) * keys) return;
  const int64_t row = i / keys, key = i % keys;
  slots[i] = page_table_slot(table, row * width, key, page_size);
}

}  // namespace

int cuda_device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

std::vector<int64_t> device_page_table_slots(const std::vector<int32_t>& table, int32_t rows, int32_t width,
                                             int32_t keys, int32_t page_size) {
  const size_t n = static_cast<size_t>(rows) * keys;
  int32_t* d_table = nullptr;
  int64_t* d_slots = nullptr;
  check(cudaMalloc(&d_table, table.size() * sizeof(int32_t)), "cudaMalloc(table)");
  check(cudaMalloc(&d_slots, n * sizeof(int64_t)), "cudaMalloc(slots)");
  check(cudaMemcpy(d_table, table.data(), table.size() * sizeof(int32_t), cudaMemcpyHostToDevice), "cudaMemcpy(table)");
  const int threads = 256;
  slots_kernel<<<static_cast<unsigned>((n + threads - 1) / threads), threads>>>(d_table, rows, width, keys, page_size, d_slots);
  check(cudaGetLastError(), "slots_kernel launch");
  std::vector<int64_t> slots(n);
  check(cudaMemcpy(slots.data(), d_slots, n * sizeof(int64_t), cudaMemcpyDeviceToHost), "cudaMemcpy(slots)");
  cudaFree(d_table);
  cudaFree(d_slots);
  return slots;
}

}  // namespace kvfuzz
