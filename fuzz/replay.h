// The command line that replays a finding, as every report of kvfuzz prints it.
//
// Where it sits: the end of the data flow, for people. Campaign reports (.txt and .min.txt) and
// index.jsonl, `kvfuzz check`, `kvfuzz shrink -o`, `kvfuzz fingerprint` and `kvfuzz faults --out`
// all print one of these, and pasting it into a fresh shell, from any directory, must reproduce
// the finding exactly (exit 1): the kvfuzz binary and the case file by their absolute paths (no
// kvfuzz on PATH is needed), the backend and the flags that bring it back (an adapter's
// --adapter: its command runs from the directory kvfuzz ran in, so a line with flags runs in a
// subshell there), every fault that was switched on for that backend, and the metamorphic
// variant seed when the finding needs variants.
//
//   set_replay_program("/src/kvfuzz/build/fuzz/kvfuzz");  // main() does: the running binary
//   Replay r{"findings/oracle-fa-3.json", "fa", {"fa_local_token_table"}, 0, {}};
//   std::cout << replay_command(r);
//   // /src/kvfuzz/build/fuzz/kvfuzz check /home/me/findings/oracle-fa-3.json --backend fa --fault fa_local_token_table
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

// The line as it is pasted: absolute paths, "(cd DIR && ...)" around one with flags. `before`:
// a command the line runs first (the `kvfuzz gen ... > FILE` that writes a case not saved);
// `r.file` is then where it writes the case, named as given.
std::string replay_command(const Replay& r, const std::string& before = "");

// The same without paths of this machine ("kvfuzz check FILE ...", FILE as given): for text
// that is committed or sent elsewhere (kvfuzz repro's bundles).
std::string portable_replay_command(const Replay& r);

// How replay lines name kvfuzz: "kvfuzz" until set (main() sets the running binary's absolute path).
void set_replay_program(const std::string& path);
const std::string& replay_program();

// `s` as one POSIX shell word: bare when it holds only safe characters, else in single quotes.
std::string shell_quote(const std::string& s);

}  // namespace kvfuzz
