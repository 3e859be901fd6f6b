// Test helpers that run the built kvfuzz binary the way a user does, through /bin/sh.
//
// Where it sits: shared by the tests that treat kvfuzz as a black box (cli_test.cc,
// replay_test.cc); KVFUZZ_BIN is the binary's path, set by fuzz/tests/CMakeLists.txt.
//
//   Result r = run_kvfuzz("check case.json --backend fa");   // r.code: 0, 1 or 2
//   Result s = run_shell("cd dir && ls");                    // any command line
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace kvfuzz::test {

struct Result {
  int code = -1;
  std::string output;  // stdout and stderr together
};

inline Result run_shell(const std::string& command) {
  const std::string cmd = command + " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline Result run_kvfuzz(const std::string& args) { return run_shell(std::string(KVFUZZ_BIN) + " " + args); }

// A fresh folder under the system's temp directory (removed first if it exists).
inline std::filesystem::path temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace kvfuzz::test
