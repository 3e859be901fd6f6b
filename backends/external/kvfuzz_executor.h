/* kvfuzz_executor.h: the C ABI of an executor that kvfuzz checks out of process.
 *
 * Where it sits: the C, C++ and CUDA counterpart of the Python adapter package
 * (adapters/kvfuzz_adapter). An executor is a shared library exporting the two functions below;
 * the worker binary kvfuzz-worker (backends/external/worker/) loads it with dlopen, speaks kvfuzz's
 * adapter protocol (JSON lines on fds 3 and 4, .npy arrays in an exchange folder) and hands every
 * array to the library inside a heap buffer with sentinel guard zones before and after. After
 * each call it checks that every guard is intact and every input unchanged (property "in-bounds",
 * naming the array); a crash of the library is a crash of the worker (property "crash"), which
 * kvfuzz survives by starting a fresh worker.
 *
 * Plain C99; also compiles as C++ (and so in a .cu file). Stable: kvfuzz_call starts with a
 * version; fields are only ever added at the end, with a new version.
 *
 * Usage, an executor of the page_table family (adapters/examples/cpp/page_table_executor.cc is a
 * complete one):
 *
 *   #include "backends/external/kvfuzz_executor.h"
 *   #include <string.h>
 *
 *   KVFUZZ_EXPORT int kvfuzz_executor_declare(char* json, size_t capacity) {
 *     const char* d = "{\"kvfuzz_adapter\":1,\"name\":\"my_kernel\",\"role\":\"executor\","
 *                     "\"family\":\"page_table\",\"supports\":{\"dtypes\":[\"bf16\"]},"
 *                     "\"precision\":{\"p_dtype\":\"cache\",\"out_dtype\":\"fp32\"}}";
 *     if (strlen(d) + 1 > capacity) return 1;
 *     strcpy(json, d);
 *     return 0;
 *   }
 *
 *   KVFUZZ_EXPORT int kvfuzz_executor_run(const kvfuzz_call* call) {
 *     const kvfuzz_array* table = kvfuzz_find_array(call, "full.parts.0.page_table");
 *     if (!table || table->dtype != KVFUZZ_I32)
 *       return kvfuzz_fail(call, "no int32 full.parts.0.page_table");
 *     const float* q = (const float*)call->q.data;        // [layers, tokens, q_heads, head_dim]
 *     const float* k0 = (const float*)call->k_cache[0].data;  // [slots, kv_heads, head_dim]
 *     ... parse call->manifest_json (its "plan" is the family's plan.json) ...
 *     call->out[0] = ...;                                // [layers, tokens, q_heads, v_head_dim]
 *     call->lse[0] = ...;                                // [layers, tokens, q_heads], natural log
 *     return 0;
 *   }
 *
 *   $ c++ -shared -fPIC -O2 -I<kvfuzz checkout> my_kernel.cc -o libmy_kernel.so
 *   $ kvfuzz run --adapter "build/backends/kvfuzz-worker ./libmy_kernel.so" --backend my_kernel
 *
 * The declaration is the JSON the Python package's @executor writes (adapters/kvfuzz_adapter/
 * declare.py): name, role "executor", family, supports, precision.
 *
 * Thread safety: a library may add "thread_safe": true to its declaration (optional; absent:
 * false). It promises that kvfuzz_executor_run may run on several threads at once, each call with
 * its own kvfuzz_call, and keeps no state shared by calls that is not safe to share (a CUDA
 * executor: each thread on its own stream, e.g. built with nvcc --default-stream per-thread and
 * waiting with cudaStreamSynchronize(cudaStreamPerThread), never cudaDeviceSynchronize). Only then
 * does kvfuzz-worker, offered lanes by kvfuzz (KVFUZZ_ADAPTER_LANES=K, an executor server's
 * `--server-lanes`), answer up to K requests at once, one thread each (PROTOCOL.md "lanes"); it
 * declares "lanes": K for the library and leaves "thread_safe" out of what it sends kvfuzz.
 *
 * One call per value set: kvfuzz_executor_run is called once for each set of values of a request
 * (same metadata, different Q and pools), one call at a time on the request's thread. It must write all of out and lse
 * (a query that sees no key: out 0, lse -inf); the worker fills both with NaN before the call.
 * Return 0 on success; anything else is a failed run, reported with the text the library wrote
 * into call->error (kvfuzz_fail does both).
 */
#ifndef KVFUZZ_EXECUTOR_H
#define KVFUZZ_EXECUTOR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVFUZZ_EXECUTOR_VERSION 1
#define KVFUZZ_MAX_DIMS 8
/* Room the worker gives kvfuzz_executor_declare. */
#define KVFUZZ_DECLARATION_CAPACITY 65536

#if defined(__GNUC__) || defined(__clang__)
#define KVFUZZ_EXPORT_VISIBILITY __attribute__((visibility("default")))
#else
#define KVFUZZ_EXPORT_VISIBILITY
#endif
#ifdef __cplusplus
#define KVFUZZ_EXPORT extern "C" KVFUZZ_EXPORT_VISIBILITY
#else
#define KVFUZZ_EXPORT KVFUZZ_EXPORT_VISIBILITY
#endif

/* Element types, as in the .npy files of the exchange. */
typedef enum kvfuzz_dtype {
  KVFUZZ_I32 = 1, /* <i4 */
  KVFUZZ_I64 = 2, /* <i8 */
  KVFUZZ_U8 = 3,  /* |u1 */
  KVFUZZ_F16 = 4, /* <f2 */
  KVFUZZ_F32 = 5, /* <f4 */
  KVFUZZ_F64 = 6  /* <f8 */
} kvfuzz_dtype;

/* One read-only array, C order. data is NULL only when the array is absent (v_cache of MLA). */
typedef struct kvfuzz_array {
  const char* name;                /* contract name: "full.parts.0.page_table", "q", "k_cache.3" */
  int32_t dtype;                   /* kvfuzz_dtype */
  int32_t ndim;
  int64_t shape[KVFUZZ_MAX_DIMS];
  const void* data;
  size_t bytes;
} kvfuzz_array;

typedef struct kvfuzz_call {
  int32_t version;                 /* KVFUZZ_EXECUTOR_VERSION */
  const char* manifest_json;       /* the request's manifest.json, NUL-terminated: "case" (model,
                                      dtype, page_size, num_tokens, pools, batch), "plan" (the
                                      family's plan.json), "arrays", "sets", "outputs" */
  const char* value_set;           /* the value set of this call ("sets" key) */

  int32_t num_arrays;              /* the family's metadata arrays, as listed in "arrays" */
  const kvfuzz_array* arrays;

  int32_t num_layers;
  kvfuzz_array q;                  /* [layers, tokens, q_heads, head_dim] float32 */
  kvfuzz_array k_new;              /* [layers, tokens, kv_heads, head_dim]: already in the pools */
  kvfuzz_array v_new;              /* [layers, tokens, kv_heads, v_head_dim] */
  const kvfuzz_array* k_cache;     /* [num_layers] of [slots, kv_heads, head_dim] float32; always dense:
                                      kvfuzz-worker answers cases whose pools came sparse (over 2^26
                                      elements, PROTOCOL.md) unsupported, without calling the library */
  const kvfuzz_array* v_cache;     /* [num_layers] of [slots, kv_heads, v_head_dim]; MLA models:
                                      data NULL, V is the first v_head_dim values of each K row */

  float* out;                      /* [layers, tokens, q_heads, v_head_dim], written by the call */
  size_t out_bytes;
  int64_t out_shape[4];
  float* lse;                      /* [layers, tokens, q_heads], natural-log LSE */
  size_t lse_bytes;
  int64_t lse_shape[3];

  char* error;                     /* a message for a failed run, NUL-terminated */
  size_t error_capacity;
} kvfuzz_call;

/* Exported by the executor library. Both return 0 on success. */
int kvfuzz_executor_declare(char* json, size_t capacity);
int kvfuzz_executor_run(const kvfuzz_call* call);
typedef int (*kvfuzz_executor_declare_fn)(char* json, size_t capacity);
typedef int (*kvfuzz_executor_run_fn)(const kvfuzz_call* call);

/* The metadata array named `name`, or NULL. */
static inline const kvfuzz_array* kvfuzz_find_array(const kvfuzz_call* call, const char* name) {
  int32_t i;
  for (i = 0; i < call->num_arrays; ++i)
    if (strcmp(call->arrays[i].name, name) == 0) return &call->arrays[i];
  return NULL;
}

/* The metadata array `name` as int32 with its element count, or NULL if absent or not int32. */
static inline const int32_t* kvfuzz_find_i32(const kvfuzz_call* call, const char* name, int64_t* count) {
  const kvfuzz_array* a = kvfuzz_find_array(call, name);
  if (!a || a->dtype != KVFUZZ_I32) return NULL;
  if (count) *count = (int64_t)(a->bytes / sizeof(int32_t));
  return (const int32_t*)a->data;
}

/* Number of elements of an array. */
static inline int64_t kvfuzz_elements(const kvfuzz_array* a) {
  int64_t n = 1;
  int32_t d;
  for (d = 0; d < a->ndim; ++d) n *= a->shape[d];
  return n;
}

/* Writes a printf-style message into call->error and returns 1: `return kvfuzz_fail(call, ...);` */
static inline int kvfuzz_fail(const kvfuzz_call* call, const char* format, ...) {
  va_list args;
  if (call->error && call->error_capacity > 0) {
    va_start(args, format);
    vsnprintf(call->error, call->error_capacity, format, args);
    va_end(args);
  }
  return 1;
}

#ifdef __cplusplus
}
#endif

#endif /* KVFUZZ_EXECUTOR_H */
