// Address arithmetic of the paged KV cache, the same code for CPU executors and CUDA kernels.
//
// Where it sits: every executor turns (row, key index) into a physical slot through one of these
// functions, so a CPU executor and a CUDA kernel that consume the same metadata compute the same
// address. `Indices` is anything indexable: a raw pointer on the device, a checked Buffer on the
// CPU (which throws on an index outside its capacity).
//
//   // flash-attn style page table, page-granular: PT[row][key / ps] * ps + key % ps
//   int64_t slot = page_table_slot(page_table, row * row_stride, key, page_size);
//   // FlashInfer style paged CSR: indices[indptr[row] + key / ps] * ps + key % ps
//   int64_t slot = paged_csr_slot(indices, indptr[row], key, page_size);
#pragma once

#include <cstdint>

#include "reference/host_device.h"

namespace kvfuzz {

// Slot of `key` in a page-granular table row that starts at `row_offset`.
template <class Indices>
KVFUZZ_HD int64_t page_table_slot(const Indices& table, int64_t row_offset, int64_t key, int32_t page_size) {
  return static_cast<int64_t>(table[row_offset + key / page_size]) * page_size + key % page_size;
}

// Slot of `key` of a paged CSR row whose pages start at `first_page` in `indices`. With page
// size 1 this is a token CSR (sglang's FlashInfer and Triton plans).
template <class Indices>
KVFUZZ_HD int64_t paged_csr_slot(const Indices& indices, int64_t first_page, int64_t key, int32_t page_size) {
  return static_cast<int64_t>(indices[first_page + key / page_size]) * page_size + key % page_size;
}

// Keys of a paged CSR row: (pages - 1) * page_size + last_page_len, or 0 without pages
// (FlashInfer page.cuh, paged_kv_t::get_length).
KVFUZZ_HD int64_t paged_csr_length(int64_t pages, int64_t last_page_len, int32_t page_size) {
  return pages == 0 ? 0 : (pages - 1) * page_size + last_page_len;
}

// Bottom-right causal alignment: query i of q_len in a row of k_len keys sits at key index
// k_len - q_len + i and sees keys up to it; a left window W keeps keys >= that index - W.
KVFUZZ_HD int64_t causal_last_key(int64_t k_len, int64_t q_len, int64_t i) { return k_len - q_len + i; }

}  // namespace kvfuzz
