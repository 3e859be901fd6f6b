#include "fuzz/replay.h"

#include <cctype>

namespace kvfuzz {

std::string shell_quote(const std::string& s) {
  bool safe = !s.empty();
  for (const char c : s)
    safe =
        safe && (std::isalnum(static_cast<unsigned char>(c)) || std::string("/._-+=:,@").find(c) != std::string::npos);
  if (safe) return s;
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string replay_command(const Replay& r) {
  std::string cmd = "kvfuzz check " + shell_quote(r.file) + " --backend " + shell_quote(r.backend);
  for (const std::string& f : r.flags) cmd += " " + shell_quote(f);
  for (const std::string& f : r.faults) cmd += " --fault " + shell_quote(f);
  if (r.variant_seed != 0) cmd += " --variant-seed " + std::to_string(r.variant_seed);
  return cmd;
}

}  // namespace kvfuzz
