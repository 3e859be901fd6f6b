#include "fuzz/replay.h"

#include <vector>

namespace kvfuzz {

std::string shell_quote(const std::string& word) {
  if (!word.empty() &&
      word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,/:=+@%") == std::string::npos)
    return word;
  std::string q = "'";
  for (char c : word) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string replay_backend_flags(const Backend& backend) {
  std::string flags = "--backend " + shell_quote(std::string(backend.name()));
  for (const std::string& f : backend.replay_flags()) flags += " " + shell_quote(f);
  return flags;
}

}  // namespace kvfuzz
