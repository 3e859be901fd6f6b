// Address translation on the GPU with the same code the CPU executors use (paged_view.h).
//
// Where it sits: the first piece of the CUDA executors. Given a page-granular table, it computes
// the slot of every (row, key) on the device; the test compares with the host, proving that a
// CUDA kernel consuming kvfuzz metadata addresses exactly what the CPU executor does.
//
//   std::vector<int64_t> slots = device_page_table_slots(table, rows, width, keys, page_size);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvfuzz {

// Number of CUDA devices (0 without a GPU or a driver).
int cuda_device_count();

// slots[row * keys + k] = page_table_slot(table, row * width, k, page_size), computed by a kernel.
// Throws std::runtime_error naming the CUDA call that failed.
std::vector<int64_t> device_page_table_slots(const std::vector<int32_t>& table, int32_t rows, int32_t width,
                                             int32_t keys, int32_t page_size);

}  // namespace kvfuzz
