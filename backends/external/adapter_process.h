// One running adapter: a child process that speaks the worker protocol (PROTOCOL.md) — one JSON
// line per message on its fd 3 (requests) and fd 4 (answers), its stdout and stderr going to a
// log file.
//
// Where it sits: under the worker pool (worker_pool.h). It knows processes, pipes and time, not
// attention: start, send, wait for one answer line with a timeout, kill. Anything that goes wrong
// is a BackendFailure naming the adapter: "crash" when the process died (with its exit status and
// the tail of its log), "hang" when no answer came in time.
//
//   AdapterProcess p("python3 my_adapter.py", "/dev/shm/kvfuzz-1-0");
//   nlohmann::json hello = p.receive(30);
//   p.send({{"op", "execute"}, ...});
//   nlohmann::json answer = p.receive(60);
#pragma once

#include <sys/types.h>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvfuzz {

class AdapterProcess {
 public:
  // Starts `command` with /bin/sh -c in its own process group, in a fresh work folder `dir`;
  // `env` ("NAME=value") is added to its environment (an executor server's CUDA_VISIBLE_DEVICES).
  AdapterProcess(std::string command, std::string dir, const std::vector<std::string>& env = {});
  ~AdapterProcess();
  AdapterProcess(const AdapterProcess&) = delete;
  AdapterProcess& operator=(const AdapterProcess&) = delete;

  void send(const nlohmann::json& message);
  // send() that only says whether the whole line went out: safe from one thread while another
  // waits in receive() (an executor server's reader), which is the one that sees a death.
  bool try_send(const nlohmann::json& message);
  // The next answer line; throws BackendFailure("hang") after `seconds`, ("crash") if the
  // process ended, ("contract") if the line is not a JSON object.
  nlohmann::json receive(double seconds);
  // Kills the whole process group and reaps it.
  void kill();
  // Sends SIGKILL to the process group and nothing else (no fd closed, nothing reaped): safe from
  // any thread; the thread in receive() then sees the process die.
  void signal_kill();
  bool alive() const { return pid_ > 0; }
  // What a hang finding says: the same words whether a worker or a server hung.
  std::string hang_message(double seconds) const;

  const std::string& dir() const { return dir_; }
  // True the first time this process is asked about `key` (Adapter: a kernel variant's first
  // request in this worker).
  bool first_time(const std::string& key) { return seen_.insert(key).second; }
  // The last `bytes` of what the adapter printed (stdout and stderr).
  std::string log_tail(size_t bytes = 2000) const;

 private:
  std::string died_message();

  std::string command_, dir_, log_path_;
  std::atomic<pid_t> pid_{-1};
  pid_t group_ = -1;  // the process group, kept after pid_ is reaped (signal_kill)
  int to_child_ = -1, from_child_ = -1;
  std::mutex fd_mu_;     // send() against kill() closing the fds
  std::string pending_;  // bytes read past the last answer line
  std::unordered_set<std::string> seen_;
};

// A fresh folder for adapter exchange, in /dev/shm when it is usable (a tmpfs), else $TMPDIR.
std::string make_exchange_dir(const std::string& tag);
void remove_tree(const std::string& dir);

}  // namespace kvfuzz
