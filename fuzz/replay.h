// The command line that replays a finding, as every report of kvfuzz prints it.
//
// Where it sits: the end of the data flow, for people. Campaign reports (.txt and .min.txt),
// `kvfuzz check`, `kvfuzz shrink -o` and `kvfuzz faults --out` all print one of these, and pasting
// it into a shell must reproduce the finding exactly (exit 1): the case file (quoted for the
// shell), the backend and the flags that bring it back (an adapter's --adapter), every fault that
// was switched on for that backend, and the metamorphic variant seed when the finding needs
// variants.
//
//   Replay r{"findings/oracle-fa-3.json", "fa", {"fa_local_token_table"}, 0, {}};
//   std::cout << replay_command(r);
//   // kvfuzz check findings/oracle-fa-3.json --backend fa --fault fa_local_token_table
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvfuzz {

struct Replay {
  std::string file;                 // the case file
  std::string backend;              // a backend name, or all
  std::vector<std::string> faults;  // planner faults switched on
  uint64_t variant_seed = 0;        // seed of the metamorphic variants (kvfuzz check --variant-seed)
  std::vector<std::string> flags;   // what finds the backend again: Backend::replay_flags()
};

std::string replay_command(const Replay& r);

// `s` as one POSIX shell word: bare when it holds only safe characters, else in single quotes.
std::string shell_quote(const std::string& s);

}  // namespace kvfuzz
