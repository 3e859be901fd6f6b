// libFuzzer target that fails on purpose, the way KVFUZZ_FAIL says, so that a test
// (fuzz/tests/fuzz_smoke_test.sh) can check that ci/fuzz_smoke.sh fails when a fuzzer does:
//   crash    aborts on the first input                      -> a crash- file
//   leak     leaks a little on every non-empty input        -> a leak- file (LeakSanitizer)
//   timeout  sleeps 3 s on every input (run with -timeout=1) -> a timeout- file
//   oom      allocates 3 GiB (past -malloc_limit_mb)        -> an oom- file
//   exit     _Exit(1) on the first input                    -> a non-zero exit and no file
//   quit     exit(0) before the first input                 -> no input runs
// Unset or empty, every input passes. Built only on request (EXCLUDE_FROM_ALL), never shipped.
//
//   KVFUZZ_FAIL=leak bash ci/fuzz_smoke.sh 3 failing   # exits 1: "left leak-..."
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

std::string mode() {
  const char* m = std::getenv("KVFUZZ_FAIL");
  return m ? m : "";
}

volatile void* sink;  // keeps the leaked and the huge allocations from being optimized away

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string m = mode();
  if (!m.empty() && m != "crash" && m != "leak" && m != "timeout" && m != "oom" && m != "exit" && m != "quit") {
    std::fprintf(stderr, "failing_fuzzer: KVFUZZ_FAIL=%s is none of crash, leak, timeout, oom, exit, quit\n", m.c_str());
    std::exit(2);
  }
  if (m == "quit") std::exit(0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t size) {
  static const std::string m = mode();
  if (m == "crash") std::abort();
  if (m == "leak" && size > 0) {  // not on the empty first input, whose check can miss it
    sink = new int;
    sink = nullptr;  // the block is unreachable: a leak
  }
  if (m == "timeout") std::this_thread::sleep_for(std::chrono::seconds(3));
  if (m == "oom") {
    sink = std::malloc(size_t{3} << 30);
    std::free(const_cast<void*>(sink));
  }
  if (m == "exit") std::_Exit(1);
  return 0;
}
