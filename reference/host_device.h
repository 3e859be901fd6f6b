// KVFUZZ_HD: marks a function that runs on the host and, compiled by nvcc, on the device too.
//
// Where it sits: below everything. The value types and address arithmetic shared by CPU code and
// CUDA kernels (reference/draft_layout.h, backends/common/paged_view.h,
// backends/triton/triton_split_range.h) include this one definition. C++17 for nvcc.
//
//   KVFUZZ_HD int64_t slot(int64_t page, int64_t offset, int32_t ps) { return page * ps + offset; }
#pragma once

#if defined(__CUDACC__)
#define KVFUZZ_HD __host__ __device__ __forceinline__
#else
#define KVFUZZ_HD inline
#endif
