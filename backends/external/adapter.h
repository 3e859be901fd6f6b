// An external adapter: its declaration and the worker processes that serve it.
//
// Where it sits: `--adapter CMD` starts one (kvfuzz register_adapter, registry.h), which checks
// the declaration at once (bad input: exit 2 before a campaign); pair backends (pair_backend.h)
// send it requests. Workers are started on demand, one per concurrent caller (campaign jobs), and
// reused across cases; any failure — crash, hang, an exception the adapter reports, a malformed
// answer — discards that worker (a fresh one serves the next request) and is thrown as a
// BackendFailure, which the property harness turns into a finding.
//
//   auto a = Adapter::start("python3 examples/numpy_page_table.py", /*timeout=*/60);
//   nlohmann::json answer = a->call("execute", [&](const std::string& dir) { write...(dir); },
//                                   [&](const std::string& dir) { read...(dir); });
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/external/adapter_process.h"
#include "backends/external/adapter_spec.h"

namespace kvfuzz {

// The command line's default --adapter-timeout, in seconds.
struct AdapterOptionsDefaults {
  static constexpr double kTimeout = 120;
};

struct AdapterStats {
  std::atomic<int64_t> requests{0}, crashes{0}, hangs{0}, errors{0}, restarts{0}, unsupported{0};
  // Time the adapter reports its own function took (answer "seconds"), summed: the executor
  // alone, in its process, without the exchange around it.
  std::atomic<int64_t> function_nanoseconds{0};
};

class Adapter {
 public:
  // Starts a first worker and reads its declaration; throws ContractError naming the command if
  // it does not start, does not declare itself within `timeout` seconds, or declares nonsense.
  static std::shared_ptr<Adapter> start(const std::string& command, double timeout);

  const AdapterSpec& spec() const { return spec_; }
  const AdapterStats& stats() const { return stats_; }
  double timeout() const { return timeout_; }

  // One request: `write(dir)` fills a fresh request folder, the adapter answers, `read(dir, answer)`
  // takes the results. Throws BackendFailure.
  void call(const std::string& op, const std::function<void(const std::string&)>& write,
            const std::function<void(const std::string&, const nlohmann::json&)>& read);

 private:
  Adapter(std::string command, double timeout) : command_(std::move(command)), timeout_(timeout) {}
  std::unique_ptr<AdapterProcess> launch(nlohmann::json* hello);

  std::string command_;
  double timeout_;
  AdapterSpec spec_;
  std::mutex mu_;
  std::vector<std::unique_ptr<AdapterProcess>> idle_;
  AdapterStats stats_;
  std::atomic<int64_t> next_request_{0};
};

}  // namespace kvfuzz
