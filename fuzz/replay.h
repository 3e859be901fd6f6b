// Replay lines: the command a report prints so that pasting it reproduces the finding.
//
// Where it sits: campaigns, the shrinker's reports and the command line print these; a backend
// built from adapters needs its --adapter flags, a finding planted with a fault its --fault.
//
//   std::string line = "kvfuzz check " + shell_quote(path) + " " + replay_backend_flags(backend);
#pragma once

#include <string>

#include "backends/backend.h"

namespace kvfuzz {

// A word quoted for a POSIX shell when it needs it.
std::string shell_quote(const std::string& word);

// --backend NAME plus the flags that bring that backend back (its adapters).
std::string replay_backend_flags(const Backend& backend);

}  // namespace kvfuzz
