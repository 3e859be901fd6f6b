// The broken variants of the C++ example executors: KVFUZZ_EXAMPLE_BREAK=<name> makes a correct
// executor wrong in one known way, and kvfuzz's tests (fuzz/tests/cpp_adapter_test.sh) check that
// a campaign catches each with the right property.
//
// Where it sits: read by example_attention.h (which keys a row reads, the LSE's base) and
// example_executor.h (crashes, hangs, writes out of bounds, broken declarations).
//
//   if (broken() == Break::drop_last_key && k_len > 1) --k_len;
#pragma once

#include <cstdlib>
#include <cstring>

namespace kvfuzz_example {

enum class Break {
  none,
  drop_last_key,           // each row reads one key fewer
  next_page,               // a row's last page is read from the next page id
  freed_slot,              // a row's first key is read from the pool's last slot
  lse_base2,               // the LSE is returned in base 2
  segfault,                // a write through a null pointer
  hang,                    // sleeps for an hour
  oob_write,               // writes 64 bytes past the end of out
  write_input,             // changes the first value of q (inputs are read-only)
  declare_garbage,         // declares something that is not JSON
  declare_unknown_family,  // declares family "no_such_family"
  unknown,                 // a name none of the above: the executor refuses to run
};

inline Break broken() {
  static const Break b = [] {
    const char* s = std::getenv("KVFUZZ_EXAMPLE_BREAK");
    if (!s || !*s) return Break::none;
    const char* names[] = {"drop_last_key", "next_page", "freed_slot", "lse_base2", "segfault",
                           "hang", "oob_write", "write_input", "declare_garbage", "declare_unknown_family"};
    for (int i = 0; i < 10; ++i)
      if (std::strcmp(s, names[i]) == 0) return static_cast<Break>(i + 1);
    return Break::unknown;
  }();
  return b;
}

}  // namespace kvfuzz_example
