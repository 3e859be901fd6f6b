// An external adapter: its declaration and the worker processes that serve it.
//
// Where it sits: `--adapter CMD` starts one (kvfuzz register_adapter, registry.h), which checks
// the declaration at once (bad input: exit 2 before a campaign); pair backends (pair_backend.h)
// send it requests. Workers are started on demand, one per concurrent caller (campaign jobs), and
// reused across cases; any failure — crash, hang, an exception the adapter reports, a malformed
// answer — discards that worker (a fresh one serves the next request) and is thrown as a
// BackendFailure, which the property harness turns into a finding. With servers
// (`--adapter-servers`, adapter_server.h) every job's requests go to one of a few long-lived
// processes instead, one per GPU; a request that fails there is re-run alone, so the failure it
// reports is its own.
//
//   auto a = Adapter::start("python3 examples/numpy_page_table.py", /*timeout=*/60);
//   a->call("execute", [&](const std::string& dir) { write...(dir); },
//           [&](const std::string& dir, const nlohmann::json& answer) { read...(dir); }, "fp16 d128 ps16");
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backends/external/adapter_process.h"
#include "backends/external/adapter_server.h"
#include "backends/external/adapter_spec.h"

namespace kvfuzz {

// Once a campaign's time is up (backends/common/deadline.h) every request is refused before it is
// sent (BackendFailure "stopped", counted by stops_on_this_thread), so the checks in flight end at
// their next request, not after every request they would still make.

// The command line's default --adapter-timeout, in seconds.
struct AdapterOptionsDefaults {
  static constexpr double kTimeout = 120;
};

struct AdapterStats {
  std::atomic<int64_t> requests{0}, crashes{0}, hangs{0}, errors{0}, restarts{0}, unsupported{0};
  // Time the adapter reports its own function took (answer "seconds"), summed: the executor
  // alone, in its process, without the exchange around it.
  std::atomic<int64_t> function_nanoseconds{0};
  // Where the requests' time went, summed over every request (PROTOCOL.md "timing"):
  std::atomic<int64_t> first_call_nanoseconds{0};     // the function's time on a kernel variant's first
                                                      // request in its worker (JIT compiles land here);
                                                      // part of function_nanoseconds
  std::atomic<int64_t> serve_nanoseconds{0};          // the adapter's whole handling ("timing.serve")
  std::atomic<int64_t> adapter_read_nanoseconds{0};   // it reading the request's arrays ("timing.read")
  std::atomic<int64_t> adapter_write_nanoseconds{0};  // it checking and writing the outputs ("timing.write")
  std::atomic<int64_t> kvfuzz_write_nanoseconds{0};   // kvfuzz writing the request folder
  std::atomic<int64_t> kvfuzz_read_nanoseconds{0};    // kvfuzz reading the answer, removing the folder
  std::atomic<int64_t> round_trip_nanoseconds{0};     // from sending the request to its answer
  // Servers: requests re-run alone after their shared process failed (AdapterServer::Lost, or an
  // error answer), and how many of those the case alone then failed too (findings).
  std::atomic<int64_t> reruns{0}, reruns_failed{0};
  std::atomic<int64_t> queue_nanoseconds{0};  // servers: requests waiting behind others in the process,
                                              // and cases waiting for their batch to be sent; part of
                                              // round_trip_nanoseconds
  // Batching (call_batched): requests that carried several kernel runs (cases, or one case's value
  // sets), the cases and runs they carried, and how many failed (their cases then re-run alone).
  std::atomic<int64_t> batches{0}, batched_cases{0}, batched_runs{0}, batches_failed{0};
  // A batch's opener waiting for a server's turn: its waits, and those that ran out (100 ms) with
  // no server's release or join waking it (a server busy that long, or a wake-up lost).
  std::atomic<int64_t> opener_waits{0}, opener_waits_ran_out{0};
  // Compile ahead (warm_up): warm-ups sent, how many failed (their process retired, as after any
  // failure on a server; never a finding), and their round trips. Not in any figure above.
  std::atomic<int64_t> warm_ups{0}, warm_ups_failed{0}, warm_up_nanoseconds{0};
};

// A caller's place in a batched request (Adapter::call_batched); a caller derives its own member
// type from it to carry its case to the batch's write and read.
struct BatchSlot {
  int64_t pool_elements = 0;  // its pools (dense K elements): a batch's stay within kSparsePoolElements
  size_t runs = 1;            // the kernel runs it brings (its value sets): a lone case of several is a batch
  // How the batch ended for this case: answered (its outputs are read), or to be run again: alone
  // (the batch failed: whose case it was is not known yet) or by itself as usual (the batch was
  // answered unsupported, or the case found no company).
  enum class Outcome : uint8_t { pending, answered, alone, single };
  Outcome outcome = Outcome::pending;
  std::chrono::steady_clock::time_point joined;
};

// How the adapter's processes are laid out: `servers` 0 gives one worker per concurrent caller
// (campaign job); n > 0 gives n servers shared by all callers, server i on GPU gpus[i % size]
// (CUDA_VISIBLE_DEVICES) when `gpus` is not empty.
struct AdapterLayout {
  int servers = 0;
  std::vector<std::string> gpus;
  bool batch = true;  // servers batch the cases of an executor that declared "batch": true
  int lanes = 1;      // requests each server is offered to work on at once (KVFUZZ_ADAPTER_LANES)
};

class Adapter {
 public:
  // Starts a first worker and reads its declaration; throws ContractError naming the command if
  // it does not start, does not declare itself within `timeout` seconds, or declares nonsense.
  static std::shared_ptr<Adapter> start(const std::string& command, double timeout, const AdapterLayout& layout = {});
  ~Adapter();

  const AdapterSpec& spec() const { return spec_; }
  const AdapterStats& stats() const { return stats_; }
  double timeout() const { return timeout_; }
  const AdapterLayout& layout() const { return layout_; }
  // Servers: the requests the first server's process declared it works on at once ("lanes"; 1 without).
  int server_lanes() const { return servers_.empty() ? 1 : servers_.front()->lanes(); }
  // Processes restarted so far (workers replaced, or servers restarted).
  int64_t server_restarts() const;
  // The campaign's time is up: the servers' processes are killed, their requests in flight dropped
  // (a case with one is cut short: stops_on_this_thread counts it), and none
  // starts again. Per-job workers finish the request they run.
  void stop_servers();

  // One request: `write(dir)` fills a fresh request folder, the adapter answers, `read(dir, answer)`
  // takes the results. `variant` names the kernel variant the request needs (its function time
  // counts as a first call when the worker has not run that variant before; "" never does).
  // Throws BackendFailure.
  void call(const std::string& op, const std::function<void(const std::string&)>& write,
            const std::function<void(const std::string&, const nlohmann::json&)>& read, const std::string& variant = "",
            bool alone = false);

  // Servers, and an executor that declared "batch": true: cases of one shape (`key`) may share a
  // request. The caller joins the batch of `key` gathering for its server's next turn, or opens
  // one and sends it when a server can take it (fewer than kBatchDepth requests a lane: with one
  // lane, idle; a server whose process works on several requests at once takes as many), with up
  // to kMaxBatch cases. The batch's opener writes and reads it with its `write` and `read`, given
  // every member. Returns how it ended for this caller (BatchSlot::Outcome): `alone` and `single`
  // mean the caller runs its case again through call(). Never throws for the batch's failure.
  bool batches() const { return !servers_.empty() && spec_.batch && layout_.batch; }
  static constexpr size_t kMaxBatch = 32;
  static constexpr int kBatchDepth = 1;
  static constexpr std::chrono::milliseconds kOpenerWait{100};  // an opener's wait: a safety net
  using BatchWrite = std::function<void(const std::string&, const std::vector<BatchSlot*>&)>;
  using BatchRead = std::function<void(const std::string&, const nlohmann::json&, const std::vector<BatchSlot*>&)>;
  BatchSlot::Outcome call_batched(const std::string& key, BatchSlot& me, const BatchWrite& write, const BatchRead& read,
                                  const std::string& variant);

  // Compile ahead (fuzz/compile_ahead.h): whether server `server` wants a warm-up of `variant` (its
  // process has not run it, it was never sent one, no warm-up of it failed on any server, and the
  // campaign's time is not up), and a warm-up: one request written by `write`, sent to that server
  // only, outside any case: its answer is discarded, a failure (which retires the process, as any
  // failure on a server does) only counted. While it runs, the jobs' requests go to other servers
  // when there are any. False when it failed; never throws. `busyness`: how busy a server is, as
  // least_loaded compares them (a warm-up in flight, then requests waiting): smaller is idler.
  size_t server_count() const { return servers_.size(); }
  std::pair<bool, int> busyness(size_t server) const;
  bool wants_warm_up(size_t server, const std::string& variant) const;
  bool warm_up(size_t server, const std::string& variant, const std::function<void(const std::string&)>& write);

 private:
  Adapter(std::string command, double timeout) : command_(std::move(command)), timeout_(timeout) {}
  std::unique_ptr<AdapterProcess> launch(nlohmann::json* hello);
  // How a server request is tried: shared, and re-run alone when that fails; alone at once (a
  // batch's case after the batch failed); shared only (a batch: false when that failed).
  enum class Attempt : uint8_t { shared_then_alone, alone, shared_only };
  // `cases`: how many cases the request carries; its times count once per case (each case's job
  // waited them).
  bool call_server(const std::string& op, const std::function<void(const std::string&)>& write,
                   const std::function<void(const std::string&, const nlohmann::json&)>& read,
                   const std::string& variant, Attempt attempt, int64_t cases = 1);
  AdapterServer* least_loaded() const;
  // A server ended a request: wakes the oldest batch opener waiting for a server's turn.
  void server_released();
  // One answer, whoever gave it: its timing into the stats, then unsupported (BackendUnsupported),
  // a failure (BackendFailure) or `read`. `first`: the variant's first request in its process.
  void settle(const nlohmann::json& answer, int64_t id, const std::string& dir,
              const std::function<void(const std::string&, const nlohmann::json&)>& read, bool first,
              int64_t cases = 1);

  std::string command_;
  double timeout_;
  AdapterLayout layout_;
  std::vector<std::unique_ptr<AdapterServer>> servers_;
  // Servers after the first start at once, beside it (each a torch import and CUDA context of
  // seconds), not at the jobs' first requests: a thread each until its declaration comes.
  std::vector<std::thread> starting_;
  std::string requests_dir_;  // servers: the request folders, outliving any one process
  AdapterSpec spec_;
  std::mutex mu_;
  std::vector<std::unique_ptr<AdapterProcess>> idle_;
  AdapterStats stats_;
  std::atomic<int64_t> next_request_{0};
  // Batches gathering, by shape key, under batch_mu_: the opener waits on `full` (or for a server),
  // its members on `answered` (each batch its own: a join or an answer wakes only its batch's
  // threads, not every job waiting).
  struct Gathering {
    std::vector<BatchSlot*> members;
    int64_t pool_elements = 0;
    std::condition_variable full, answered;
    bool woken = false;  // told of a server's release since it last found every server busy
  };
  std::mutex batch_mu_;
  std::map<std::string, std::shared_ptr<Gathering>> gathering_;
  std::deque<Gathering*> openers_;  // openers waiting for a server's turn, oldest first
  std::atomic<int> openers_waiting_{0};
  mutable std::mutex warm_mu_;
  std::set<std::string> warm_ups_failed_;  // variants whose warm-up failed: not sent again
};

}  // namespace kvfuzz
