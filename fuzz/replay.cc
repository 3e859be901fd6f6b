#include "fuzz/replay.h"

#include <cctype>
#include <filesystem>

namespace kvfuzz {
namespace {

std::string& program() {
  static std::string p = "kvfuzz";
  return p;
}

std::string check_args(const Replay& r, const std::string& file) {
  std::string cmd = " check " + shell_quote(file) + " --backend " + shell_quote(r.backend);
  for (const std::string& f : r.flags) cmd += " " + shell_quote(f);
  for (const std::string& f : r.faults) cmd += " --fault " + shell_quote(f);
  if (r.variant_seed != 0) cmd += " --variant-seed " + std::to_string(r.variant_seed);
  return cmd;
}

}  // namespace

void set_replay_program(const std::string& path) { program() = path; }
const std::string& replay_program() { return program(); }

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

std::string replay_command(const Replay& r, const std::string& before) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  const std::string file = before.empty() && !ec ? (cwd / fs::path(r.file)).lexically_normal().string() : r.file;
  std::string cmd = shell_quote(replay_program()) + check_args(r, file);
  if (!before.empty()) cmd = before + " && " + cmd;
  if (r.flags.empty() || ec) return cmd;
  return "(cd " + shell_quote(cwd.string()) + " && " + cmd + ")";
}

std::string portable_replay_command(const Replay& r) { return "kvfuzz" + check_args(r, r.file); }

}  // namespace kvfuzz
