/* Compiles the executor C ABI (backends/external/kvfuzz_executor.h) as strict C99: the header
 * must serve C executors as well as C++ and CUDA ones. Built, never run; a minimal executor. */
#include "backends/external/kvfuzz_executor.h"

KVFUZZ_EXPORT int kvfuzz_executor_declare(char* json, size_t capacity) {
  const char* d = "{\"kvfuzz_adapter\":1,\"name\":\"c99\",\"role\":\"executor\",\"family\":\"page_table\"}";
  if (strlen(d) + 1 > capacity) return 1;
  memcpy(json, d, strlen(d) + 1);
  return 0;
}

KVFUZZ_EXPORT int kvfuzz_executor_run(const kvfuzz_call* call) {
  int64_t n = 0;
  const int32_t* table = kvfuzz_find_i32(call, "full.parts.0.page_table", &n);
  if (!table) return kvfuzz_fail(call, "no page table among %d arrays", (int)call->num_arrays);
  return kvfuzz_elements(&call->q) > 0 && n > 0 ? 0 : kvfuzz_fail(call, "empty");
}
