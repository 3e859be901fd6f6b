// One adapter process shared by every campaign job: an executor server (one per GPU).
//
// Where it sits: under Adapter (adapter.h) when `--adapter-servers` asks for servers. The jobs'
// requests go down the one request channel back to back (the same worker protocol, PROTOCOL.md:
// any adapter serves as a per-job worker or as a server), a reader thread matches each answer to
// its request by id. So the process keeps one CUDA context: each kernel variant compiles or loads
// once per server, not once per job, and requests run without context switches.
//
// Lanes: an adapter that answers several requests at once (its declaration says "lanes": M,
// PROTOCOL.md; kvfuzz offers K through KVFUZZ_ADAPTER_LANES, `--server-lanes`) works on the M oldest
// unanswered requests, each on its own thread (and CUDA stream) in the one process; answers may
// come in any order. Without "lanes" the process works on one at a time (M = 1).
//
// A failure on a shared process is not yet anyone's: a CUDA illegal address poisons the context
// for every request after it, and a death or hang ends every request in flight. So a request that
// did not get an `ok` (or `unsupported`) answer from a shared process is `Lost`: the caller
// retires that process (the next request starts a fresh one) and re-runs its case `alone`, with
// no other request in flight; what the case does alone is its answer (Adapter::call).
//
//   AdapterServer s(command, {"CUDA_VISIBLE_DEVICES=1"}, timeout);
//   AdapterServer::Reply r = s.request({{"op", "execute"}, {"id", 7}, {"dir", d}}, "fp16 ps16", false);
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/external/adapter_process.h"

namespace kvfuzz {

// A request a shared process did not answer: it died or was killed (a hang in flight, another
// request's failure) first. The case has not been judged yet: re-run it alone.
class ServerLost : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class AdapterServer {
 public:
  // `env`: added to the process's environment (CUDA_VISIBLE_DEVICES=...). Nothing starts yet.
  // `lanes` > 1: offered to the process (KVFUZZ_ADAPTER_LANES); it takes what it declares.
  // `released`: called each time a request ends (answered, lost or failed; load() is lower by one
  // then), on the requesting thread, outside this server's lock: Adapter's batch openers wait on it.
  AdapterServer(std::string command, std::vector<std::string> env, double timeout, int lanes = 1,
                std::function<void()> released = {});
  ~AdapterServer();
  AdapterServer(const AdapterServer&) = delete;
  AdapterServer& operator=(const AdapterServer&) = delete;

  struct Reply {
    nlohmann::json answer;
    uint64_t generation = 0;  // which process answered
    bool first_time = false;  // the first request of `variant` in that process
    double queued = 0;        // seconds it waited: for its turn (a re-run alone, a restart), then
                              // behind other requests in the process, until a lane took it up
  };
  // Sends `message` and waits for its answer. An answer that failed (not ok, not unsupported)
  // retires its process: the next request starts a fresh one. Shared (alone = false): throws
  // ServerLost when the process died or was killed before answering. Alone: waits until no other request is in
  // flight, runs this one by itself and throws BackendFailure "crash" (it died: its exit and log
  // tail) or "hang" (no answer within the timeout: killed), the same findings a per-job worker
  // gives. Starting a process that fails to start or declare throws BackendFailure too.
  // `warm_up` (compile ahead, shared only): a request outside any case; its variant counts as run
  // (has_run), but a case's first request of it in the process still counts as its first.
  Reply request(const nlohmann::json& message, const std::string& variant, bool alone, bool warm_up = false);

  // The process's declaration: starts it when none has run yet (Adapter::start reads it).
  nlohmann::json hello();
  // Kills a process still starting (its declaration not yet come): it has served no one. A
  // running one is left alone (ask_exit). The next request starts a fresh one.
  void abandon_start();

  // Asks the running process to exit (after the requests it holds); the destructor waits for it
  // until 5 s after the ask. Asking every server first, then destroying them, lets them end at
  // once, not one after another.
  void ask_exit();
  // The campaign's time is up: kills the running process and starts none again. Requests in
  // flight become ServerLost (shared) or BackendFailure "stopped" (alone), as every later one.
  void stop();

  // Requests waiting or in flight: the least loaded server takes the next job's request. load(),
  // lanes() and warming() take no lock (a batch's opener asks them of every server while it waits).
  int load() const { return waiting_.load(); }  // sequentially consistent: Adapter::server_released
  int64_t restarts() const { return restarts_; }
  // The requests the running (or last) process works on at once: its declared "lanes", else 1.
  int lanes() const { return lanes_.load(std::memory_order_relaxed); }
  // Whether the running process has run `variant`, or this server was ever sent a warm-up of it
  // (a process restarted after a failure is not warmed again); whether a warm-up is in flight.
  bool has_run(const std::string& variant) const;
  bool warming() const { return warming_.load(std::memory_order_relaxed) > 0; }

 private:
  struct Pending {
    uint64_t generation;
    std::chrono::steady_clock::time_point sent;
    uint64_t order;  // sending order: the window (running()) is the oldest unanswered
    std::optional<std::chrono::steady_clock::time_point> started;  // when it entered the window: a lane
                                                                   // took it up
    bool answered = false;
    nlohmann::json answer;
  };
  uint64_t ensure_running(std::unique_lock<std::mutex>& lock);
  void read_answers(uint64_t generation, AdapterProcess* process);
  void check_hang(std::chrono::steady_clock::time_point now);
  // Ends process `generation` if it is still the running one (under mu_): requests in flight on
  // it become ServerLost.
  void retire_locked(uint64_t generation);
  // The unanswered requests of the running process that it works on: the lanes_ oldest, in sending
  // order. Those without a start get `now` as theirs (they just entered).
  std::vector<std::pair<int64_t, Pending*>> running(std::chrono::steady_clock::time_point now);

  const std::string command_;
  const std::vector<std::string> env_;
  const double timeout_;
  const int offered_lanes_;
  const std::function<void()> released_;
  std::atomic<int> lanes_{1};  // the running process's declared "lanes" (1 without)
  uint64_t next_order_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<AdapterProcess> process_;
  std::thread reader_;
  uint64_t generation_ = 0;     // of process_; 0: none started yet
  bool dead_ = true;            // process_ ended (its reader saw it)
  bool starting_ = false;       // one caller starts the next process, the others wait
  AdapterProcess* starting_process_ = nullptr;  // the process being started (until its hello): stop() kills it too
  std::string death_;           // how the last process ended (BackendFailure message)
  std::string death_property_;  // "crash" or "hang"
  int64_t hung_id_ = -1;        // the request the hang watch killed the process for
  nlohmann::json hello_;
  std::map<int64_t, Pending> pending_;
  std::set<std::string> seen_;    // kernel variants the running process has run
  std::set<std::string> warmed_;  // ... and those any of its processes was sent as warm-ups
  // Written under mu_, read without it (load(), warming()).
  std::atomic<int> warming_{0};   // warm-ups in flight
  std::atomic<int> waiting_{0};   // requests waiting or in flight
  int shared_ = 0, exclusive_waiting_ = 0;
  bool exclusive_ = false;
  int64_t restarts_ = 0;
  std::optional<std::chrono::steady_clock::time_point> exit_by_;  // ask_exit: the destructor's wait
  bool stopped_ = false;
};

// The GPUs a server each can take: CUDA_VISIBLE_DEVICES's entries when it is set, else one entry
// per GPU nvidia-smi lists ("0", "1", ...); empty without GPUs.
std::vector<std::string> visible_gpus();

}  // namespace kvfuzz
