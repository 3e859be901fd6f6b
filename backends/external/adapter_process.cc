#include "backends/external/adapter_process.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>

#include "backends/common/backend_failure.h"

extern char** environ;

namespace kvfuzz {
namespace {

// A write to a pipe whose reader died must fail with EPIPE, not kill kvfuzz.
void ignore_sigpipe() {
  static std::once_flag once;
  std::call_once(once, [] { std::signal(SIGPIPE, SIG_IGN); });
}

std::string signal_name(int sig) {
  const char* s = strsignal(sig);
  return "signal " + std::to_string(sig) + (s ? std::string(" (") + s + ")" : "");
}

}  // namespace

// Exchange folders of kvfuzz processes that no longer exist (killed before their destructors ran):
// a tmpfs holds them in memory, so the first folder this process makes removes them.
static void remove_stale_exchange_dirs(const std::filesystem::path& base) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(base, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("kvfuzz-", 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + 7, nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) std::filesystem::remove_all(entry.path(), ec);
  }
}

std::string make_exchange_dir(const std::string& tag) {
  namespace fs = std::filesystem;
  static std::atomic<int> counter{0};
  std::error_code ec;
  fs::path base = fs::exists("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
  static std::once_flag cleaned;
  std::call_once(cleaned, [&] { remove_stale_exchange_dirs(base); });
  const std::string name = "kvfuzz-" + std::to_string(getpid()) + "-" + tag + "-" + std::to_string(counter++);
  fs::path dir = base / name;
  if (!fs::create_directories(dir, ec)) {
    dir = fs::temp_directory_path() / name;
    fs::create_directories(dir);
  }
  return dir.string();
}

void remove_tree(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

AdapterProcess::AdapterProcess(std::string command, std::string dir, const std::vector<std::string>& env)
    : command_(std::move(command)), dir_(std::move(dir)), log_path_(dir_ + "/adapter.log") {
  ignore_sigpipe();
  int req[2], ans[2];
  if (pipe2(req, O_CLOEXEC) != 0 || pipe2(ans, O_CLOEXEC) != 0)
    throw BackendFailure("crash", "cannot create pipes: " + std::string(std::strerror(errno)));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_adddup2(&fa, req[0], 3);
  posix_spawn_file_actions_adddup2(&fa, ans[1], 4);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);

  std::vector<std::string> env_strings = {"KVFUZZ_ADAPTER_FDS=3,4", "KVFUZZ_WORK_DIR=" + dir_};
  env_strings.insert(env_strings.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  auto overridden = [&](const char* e) {
    for (const std::string& mine : env_strings)
      if (std::strncmp(e, mine.c_str(), mine.find('=') + 1) == 0) return true;
    return false;
  };
  for (char** e = environ; *e; ++e)
    if (!overridden(*e)) envp.push_back(*e);
  envp.push_back(nullptr);
  const char* argv[] = {"/bin/sh", "-c", command_.c_str(), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, "/bin/sh", &fa, &attr, const_cast<char**>(argv), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(req[0]);
  close(ans[1]);
  if (rc != 0) {
    close(req[1]);
    close(ans[0]);
    throw BackendFailure("crash", "cannot start '" + command_ + "': " + std::strerror(rc));
  }
  pid_ = pid;
  group_ = pid;
  to_child_ = req[1];
  from_child_ = ans[0];
}

AdapterProcess::~AdapterProcess() {
  if (pid_ > 0 && to_child_ >= 0) {
    // Ask politely, then make sure.
    const std::string bye = "{\"op\":\"exit\"}\n";
    [[maybe_unused]] ssize_t n = write(to_child_, bye.data(), bye.size());
  }
  kill();
  remove_tree(dir_);
}

void AdapterProcess::kill() {
  {
    std::lock_guard<std::mutex> lock(fd_mu_);
    if (to_child_ >= 0) close(to_child_);
    if (from_child_ >= 0) close(from_child_);
    to_child_ = from_child_ = -1;
  }
  if (const pid_t pid = pid_; pid > 0) {
    ::kill(-pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    pid_ = -1;
  }
}

void AdapterProcess::signal_kill() {
  if (group_ > 0) ::kill(-group_, SIGKILL);
}

std::string AdapterProcess::hang_message(double seconds) const {
  const std::string tail = log_tail();
  return "adapter '" + command_ + "' gave no answer within " + std::to_string(seconds) + " s and was killed" +
         (tail.empty() ? "" : "; its last output:\n" + tail);
}

std::string AdapterProcess::log_tail(size_t bytes) const {
  std::ifstream f(log_path_, std::ios::binary);
  if (!f) return "";
  f.seekg(0, std::ios::end);
  const auto size = static_cast<size_t>(f.tellg());
  const size_t from = size > bytes ? size - bytes : 0;
  f.seekg(static_cast<std::streamoff>(from));
  std::string s(size - from, '\0');
  f.read(s.data(), static_cast<std::streamsize>(s.size()));
  return (from > 0 ? "..." : "") + s;
}

std::string AdapterProcess::died_message() {
  std::string how = "ended";
  if (const pid_t pid = pid_; pid > 0) {
    int status = 0;
    // The answer pipe closed: the process is gone or going; give it a moment to be reaped.
    for (int i = 0; i < 200; ++i) {
      const pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        if (WIFSIGNALED(status)) how = "was killed by " + signal_name(WTERMSIG(status));
        else if (WIFEXITED(status)) how = "exited with status " + std::to_string(WEXITSTATUS(status));
        pid_ = -1;
        break;
      }
      usleep(5000);
    }
  }
  kill();
  std::string tail = log_tail();
  return "adapter '" + command_ + "' " + how + (tail.empty() ? "" : "; its last output:\n" + tail);
}

bool AdapterProcess::try_send(const nlohmann::json& message) {
  const std::string line = message.dump() + "\n";
  std::lock_guard<std::mutex> lock(fd_mu_);
  if (to_child_ < 0) return false;
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = write(to_child_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

void AdapterProcess::send(const nlohmann::json& message) {
  if (to_child_ < 0) throw BackendFailure("crash", "adapter '" + command_ + "' is not running");
  if (!try_send(message)) throw BackendFailure("crash", died_message());
}

nlohmann::json AdapterProcess::receive(double seconds) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (true) {
    const size_t nl = pending_.find('\n');
    if (nl != std::string::npos) {
      const std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object())
        throw BackendFailure("contract", "adapter '" + command_ + "' answered a line that is not a JSON object: " +
                                             line.substr(0, 200));
      return j;
    }
    if (from_child_ < 0) throw BackendFailure("crash", "adapter '" + command_ + "' is not running");
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      kill();
      throw BackendFailure("hang", hang_message(seconds));
    }
    pollfd p{from_child_, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (r < 0 && errno != EINTR) throw BackendFailure("crash", "poll failed: " + std::string(std::strerror(errno)));
    if (r <= 0) continue;
    char buf[65536];
    const ssize_t n = read(from_child_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw BackendFailure("crash", died_message());
    pending_.append(buf, static_cast<size_t>(n));
    if (pending_.size() > (size_t{16} << 20)) throw BackendFailure("contract", "adapter '" + command_ + "' sent a line over 16 MiB");
  }
}

}  // namespace kvfuzz
