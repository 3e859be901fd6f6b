// The ISA a per-ISA translation unit of the oracle compiles for (oracle_dispatch.h).
//
// Where it sits: included by the per-ISA headers (oracle_simd.h, oracle_exp.h, oracle_tiles.h)
// and oracle_isa_kernels.cc, which reference/CMakeLists.txt compiles once per ISA with
// KVFUZZ_ORACLE_ISA_ID = 0 (portable), 1 (AVX2+FMA) or 2 (AVX-512). Their code lives in namespace
// kvfuzz::KVFUZZ_ORACLE_NS (isa_portable, isa_avx2, isa_avx512) between KVFUZZ_ORACLE_BEGIN and
// KVFUZZ_ORACLE_END, which give every function defined there the ISA's target attribute. Only
// our code goes inside: system headers are included before BEGIN, so the standard library's
// inline functions stay compiled for the build's baseline in every translation unit (one
// definition, which any CPU runs).
//
//   #include <cmath>                      // system headers first
//   #include "reference/oracle_target.h"
//   KVFUZZ_ORACLE_BEGIN
//   namespace kvfuzz::KVFUZZ_ORACLE_NS { ... }
//   KVFUZZ_ORACLE_END
#pragma once

#if !defined(KVFUZZ_ORACLE_ISA_ID)
#error "oracle_target.h: compile with KVFUZZ_ORACLE_ISA_ID (reference/CMakeLists.txt's per-ISA kernels)"
#endif

#define KVFUZZ_ORACLE_PRAGMA(x) _Pragma(#x)
#define KVFUZZ_ORACLE_PRAGMA_X(x) KVFUZZ_ORACLE_PRAGMA(x)

#if KVFUZZ_ORACLE_ISA_ID == 2
#define KVFUZZ_ORACLE_NS isa_avx512
#define KVFUZZ_ORACLE_TARGET "avx512f,avx2,fma"
#elif KVFUZZ_ORACLE_ISA_ID == 1
#define KVFUZZ_ORACLE_NS isa_avx2
#define KVFUZZ_ORACLE_TARGET "avx2,fma"
#elif KVFUZZ_ORACLE_ISA_ID == 0
#define KVFUZZ_ORACLE_NS isa_portable
#else
#error "KVFUZZ_ORACLE_ISA_ID must be 0, 1 or 2"
#endif

#if !defined(KVFUZZ_ORACLE_TARGET)
#define KVFUZZ_ORACLE_BEGIN
#define KVFUZZ_ORACLE_END
#elif defined(__clang__)
#define KVFUZZ_ORACLE_BEGIN \
  KVFUZZ_ORACLE_PRAGMA_X(clang attribute push(__attribute__((target(KVFUZZ_ORACLE_TARGET))), apply_to = function))
#define KVFUZZ_ORACLE_END KVFUZZ_ORACLE_PRAGMA(clang attribute pop)
#else
#define KVFUZZ_ORACLE_BEGIN \
  KVFUZZ_ORACLE_PRAGMA(GCC push_options) KVFUZZ_ORACLE_PRAGMA_X(GCC target(KVFUZZ_ORACLE_TARGET))
#define KVFUZZ_ORACLE_END KVFUZZ_ORACLE_PRAGMA(GCC pop_options)
#endif
