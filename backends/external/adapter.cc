#include "backends/external/adapter.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>

#include "backends/common/backend_failure.h"
#include "backends/common/deadline.h"
#include "backends/contract/npy.h"
#include "backends/external/exchange.h"

namespace kvfuzz {
namespace {

int64_t nanoseconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
}

// Adds a non-negative number of seconds at answer[a][b] (absent or not a number: nothing) to `to`,
// `times` times (a batch: once per case).
void add_seconds(const nlohmann::json& answer, const char* a, const char* b, std::atomic<int64_t>& to, int64_t times) {
  if (answer.contains(a) && answer[a].is_object() && answer[a].contains(b) && answer[a][b].is_number() &&
      answer[a][b].get<double>() > 0)
    to += static_cast<int64_t>(answer[a][b].get<double>() * 1e9) * times;
}

// Throws BackendFailure "stopped" once the campaign's time is up (backends/common/deadline.h).
void refuse_when_time_is_up() { stop_when_time_is_up("the request was not sent"); }

// The folder of a request to `owner` (a folder only one request at a time uses: a thread's among a
// server's requests, a per-job worker's). An execute request reuses it: each of its files is
// written over in place (NpyWriter) and nothing is removed after a pass, where a fresh folder per
// request cost creating and unlinking every array (the largest part of kvfuzz's own CPU time in a
// server campaign: docs/gpu.md). A failed request's folder is removed (the next starts afresh);
// other requests (a planner's, whose answer folder is read whole) get a fresh one, removed after.
struct RequestFolder {
  std::string path;
  bool reused = false;
};
RequestFolder request_folder(const std::string& owner, const std::string& op, int64_t id) {
  if (op == "execute") return {owner, true};
  return {owner + "/r" + std::to_string(id), false};
}

// A server's requests: one folder per thread that sends them (each waits for its answer).
std::string thread_folder(const std::string& requests_dir) {
  static std::atomic<int64_t> next{0};
  thread_local const int64_t thread = next++;
  return requests_dir + "/t" + std::to_string(thread);
}

}  // namespace

std::unique_ptr<AdapterProcess> Adapter::launch(nlohmann::json* hello) {
  auto p = std::make_unique<AdapterProcess>(command_, make_exchange_dir("adapter"));
  *hello = p->receive(timeout_);
  return p;
}

std::shared_ptr<Adapter> Adapter::start(const std::string& command, double timeout, const AdapterLayout& layout) {
  std::shared_ptr<Adapter> a(new Adapter(command, timeout));
  a->layout_ = layout;
  nlohmann::json hello;
  std::unique_ptr<AdapterProcess> p;
  try {
    if (layout.servers > 0) {
      a->requests_dir_ = make_exchange_dir("requests");
      for (int i = 0; i < layout.servers; ++i) {
        std::vector<std::string> env;
        if (!layout.gpus.empty()) env.push_back("CUDA_VISIBLE_DEVICES=" + layout.gpus[i % layout.gpus.size()]);
        a->servers_.push_back(std::make_unique<AdapterServer>(command, env, timeout, layout.lanes,
                                                              [raw = a.get()] { raw->server_released(); }));
      }
      for (size_t i = 1; i < a->servers_.size(); ++i)
        a->starting_.emplace_back([s = a->servers_[i].get()] {
          try {
            s->hello();
          } catch (const std::exception&) {  // refused, killed or failed: a job's request starts it again
          }
        });
      hello = a->servers_.front()->hello();  // the first server's declaration: the adapter's
    } else {
      p = a->launch(&hello);
    }
  } catch (const BackendFailure& e) {
    throw ContractError("adapter '" + command + "' did not start: " + e.what());
  }
  a->spec_ = parse_spec(hello, command);
  if (p) a->idle_.push_back(std::move(p));
  return a;
}

Adapter::~Adapter() {
  for (const auto& s : servers_) s->abandon_start();  // never needed: a start still running serves no one
  for (std::thread& t : starting_) t.join();
  for (const auto& s : servers_) s->ask_exit();  // all at once: torch's teardown takes seconds a process
  servers_.clear();
  if (!requests_dir_.empty()) remove_tree(requests_dir_);
}

void Adapter::stop_servers() {
  for (const auto& s : servers_) s->stop();
  std::lock_guard<std::mutex> lock(batch_mu_);  // every waiting opener sends now (and is refused)
  for (Gathering* g : openers_) g->full.notify_one();
}

int64_t Adapter::server_restarts() const {
  int64_t n = 0;
  for (const auto& s : servers_) n += s->restarts();
  return n;
}

void Adapter::settle(const nlohmann::json& answer, int64_t id, const std::string& dir,
                     const std::function<void(const std::string&, const nlohmann::json&)>& read, bool first,
                     int64_t cases) {
  add_seconds(answer, "timing", "serve", stats_.serve_nanoseconds, cases);
  add_seconds(answer, "timing", "read", stats_.adapter_read_nanoseconds, cases);
  add_seconds(answer, "timing", "write", stats_.adapter_write_nanoseconds, cases);
  if (answer.value("id", int64_t{-1}) != id)
    throw BackendFailure("contract", "adapter '" + command_ + "' answered request " +
                                         answer.value("id", nlohmann::json()).dump() + " to request " +
                                         std::to_string(id));
  if (!answer.value("ok", false) && answer.contains("unsupported")) {
    ++stats_.unsupported;
    throw BackendUnsupported(answer["unsupported"].is_string() ? answer["unsupported"].get<std::string>()
                                                               : answer["unsupported"].dump());
  }
  if (!answer.value("ok", false)) {
    ++stats_.errors;
    const std::string error = answer.value("error", std::string("(no error message)"));
    const std::string property = answer.value("property", std::string("crash"));
    throw BackendFailure(property == "in-bounds" ? "in-bounds" : "crash", spec_.name + " failed: " + error);
  }
  int64_t function_ns = 0;
  if (answer.contains("seconds") && answer["seconds"].is_object())
    for (const auto& [set, t] : answer["seconds"].items())
      if (t.is_number()) function_ns += static_cast<int64_t>(t.get<double>() * 1e9);
  stats_.function_nanoseconds += function_ns * cases;
  if (first) stats_.first_call_nanoseconds += function_ns * cases;
  const auto t0 = std::chrono::steady_clock::now();
  read(dir, answer);
  stats_.kvfuzz_read_nanoseconds += nanoseconds_since(t0) * cases;
}

std::pair<bool, int> Adapter::busyness(size_t server) const {
  const AdapterServer& s = *servers_.at(server);
  return {s.warming(), s.load()};
}

AdapterServer* Adapter::least_loaded() const {
  // A server busy with a warm-up (a compile, maybe for seconds) only when every one is.
  size_t best = 0;
  std::pair<bool, int> best_busyness = busyness(0);
  for (size_t i = 1; i < servers_.size(); ++i)
    if (const std::pair<bool, int> b = busyness(i); b < best_busyness) best = i, best_busyness = b;
  return servers_[best].get();
}

void Adapter::server_released() {
  if (openers_waiting_.load() == 0) return;  // no batch waits for a server: nothing to wake
  std::lock_guard<std::mutex> lock(batch_mu_);
  for (Gathering* g : openers_)
    if (!g->woken) {  // the oldest not yet told: a second release at once wakes the next one
      g->woken = true;
      g->full.notify_one();
      return;
    }
}

bool Adapter::wants_warm_up(size_t server, const std::string& variant) const {
  if (time_is_up()) return false;
  {
    std::lock_guard<std::mutex> lock(warm_mu_);
    if (warm_ups_failed_.count(variant) > 0) return false;
  }
  return !servers_.at(server)->has_run(variant);
}

bool Adapter::warm_up(size_t server, const std::string& variant, const std::function<void(const std::string&)>& write) {
  if (time_is_up()) return true;  // not sent: nothing failed
  const int64_t id = next_request_++;
  const std::string dir = requests_dir_ + "/r" + std::to_string(id);
  const auto t0 = std::chrono::steady_clock::now();
  bool ok = false;
  ++stats_.warm_ups;
  try {
    std::filesystem::create_directories(dir);
    write(dir);
    const nlohmann::json answer =
        servers_.at(server)->request({{"op", "execute"}, {"id", id}, {"dir", dir}}, variant, false, true).answer;
    ok = answer.value("ok", false) || answer.contains("unsupported");
  } catch (const std::exception&) {
    // died or killed (ServerLost), did not start, or the campaign's time was up (no failure then)
    ok = time_is_up();
  }
  if (!ok) {
    ++stats_.warm_ups_failed;
    std::lock_guard<std::mutex> lock(warm_mu_);
    warm_ups_failed_.insert(variant);
  }
  stats_.warm_up_nanoseconds += nanoseconds_since(t0);
  remove_tree(dir);
  return ok;
}

// A failed answer or a lost request on a shared process is not yet the case's: the server retires
// the process (its CUDA context may be poisoned) and the case is re-run alone, whose outcome is its own.
bool Adapter::call_server(const std::string& op, const std::function<void(const std::string&)>& write,
                          const std::function<void(const std::string&, const nlohmann::json&)>& read,
                          const std::string& variant, Attempt attempt, int64_t cases) {
  AdapterServer* server = least_loaded();
  const int64_t id = next_request_++;
  const RequestFolder folder = request_folder(thread_folder(requests_dir_), op, id);
  const std::string& dir = folder.path;
  std::filesystem::create_directories(dir);
  if (attempt != Attempt::alone) stats_.requests += cases;  // a re-run alone was counted by its batch
  auto failed = [](const nlohmann::json& a) { return !a.value("ok", false) && !a.contains("unsupported"); };
  try {
    auto t0 = std::chrono::steady_clock::now();
    write(dir);
    stats_.kvfuzz_write_nanoseconds += nanoseconds_since(t0) * cases;
    const nlohmann::json message = {{"op", op}, {"id", id}, {"dir", dir}};
    t0 = std::chrono::steady_clock::now();
    std::optional<AdapterServer::Reply> reply;
    if (attempt != Attempt::alone) {
      try {
        reply = server->request(message, variant, false);
        if (failed(reply->answer)) reply.reset();  // its process was retired: re-run alone below
      } catch (const ServerLost&) {
        // its process died or was killed before answering: re-run alone below
      }
      if (!reply && attempt == Attempt::shared_only) {
        remove_tree(dir);
        return false;
      }
    }
    if (!reply) {
      refuse_when_time_is_up();  // no re-run alone past the campaign's time: the case is dropped
      ++stats_.reruns;
      try {
        reply = server->request(message, variant, true);
      } catch (const BackendFailure& e) {
        if (e.property() == "stopped") throw;  // the campaign's time was up: counted below
        ++stats_.reruns_failed;
        if (e.property() == "hang") ++stats_.hangs;
        else if (e.property() == "crash") ++stats_.crashes;
        throw;
      }
      if (failed(reply->answer)) ++stats_.reruns_failed;
    }
    stats_.round_trip_nanoseconds += nanoseconds_since(t0) * cases;
    stats_.queue_nanoseconds += static_cast<int64_t>(reply->queued * 1e9) * cases;
    settle(reply->answer, id, dir, read, reply->first_time, cases);
  } catch (const ContractError& e) {
    remove_tree(dir);
    if (attempt == Attempt::shared_only) return false;  // a batch's malformed answer: each case alone
    throw BackendFailure("contract", spec_.name + ": " + e.what());
  } catch (const BackendFailure& e) {
    remove_tree(dir);
    if (e.property() == "stopped") count_stop();  // the campaign's time was up: the case is dropped
    throw;
  } catch (...) {
    remove_tree(dir);
    throw;
  }
  if (!folder.reused) {
    const auto t0 = std::chrono::steady_clock::now();
    remove_tree(dir);
    stats_.kvfuzz_read_nanoseconds += nanoseconds_since(t0) * cases;
  }
  return true;
}

BatchSlot::Outcome Adapter::call_batched(const std::string& key, BatchSlot& me, const BatchWrite& write,
                                         const BatchRead& read, const std::string& variant) {
  refuse_when_time_is_up();
  using Clock = std::chrono::steady_clock;
  std::unique_lock<std::mutex> lock(batch_mu_);
  me.joined = Clock::now();
  me.outcome = BatchSlot::Outcome::pending;
  if (auto it = gathering_.find(key); it != gathering_.end()) {
    const std::shared_ptr<Gathering> g = it->second;  // outlives its entry: the opener erases it when sent
    if (g->members.size() < kMaxBatch && g->pool_elements + me.pool_elements <= kSparsePoolElements) {
      g->members.push_back(&me);
      g->pool_elements += me.pool_elements;
      if (g->members.size() == kMaxBatch) g->full.notify_one();  // its opener sends it now
      g->answered.wait(lock, [&] { return me.outcome != BatchSlot::Outcome::pending; });
      return me.outcome;
    }
  }
  // Open one, and send it when a server can take it: meanwhile other jobs' cases of this shape join.
  auto g = std::make_shared<Gathering>();
  g->members.push_back(&me);
  g->pool_elements = me.pool_elements;
  gathering_[key] = g;
  // A server can take it while it has a lane free: kBatchDepth requests a lane (one lane: idle).
  const auto busy = [&] {
    const AdapterServer* s = least_loaded();
    return s->load() >= kBatchDepth * s->lanes();
  };
  // Woken when full, or when a server ends a request (server_released: the oldest opener first).
  // Registered before it looks at the servers' load, so a release between the look and the wait
  // finds it (the releaser lowers the load, then reads openers_waiting_). The timed wait is a
  // safety net only: a 1 ms poll here was most of kvfuzz's futex calls.
  openers_.push_back(g.get());
  ++openers_waiting_;
  while (g->members.size() < kMaxBatch && busy() && !time_is_up()) {
    g->woken = false;
    ++stats_.opener_waits;
    if (g->full.wait_for(lock, kOpenerWait) == std::cv_status::timeout && !g->woken) ++stats_.opener_waits_ran_out;
  }
  openers_.erase(std::find(openers_.begin(), openers_.end(), g.get()));
  --openers_waiting_;
  if (auto it = gathering_.find(key); it != gathering_.end() && it->second == g) gathering_.erase(it);
  const std::vector<BatchSlot*> members = g->members;
  lock.unlock();
  // The wait for a server's turn: in its queue, had the case gone by itself.
  const Clock::time_point sent = Clock::now();
  for (const BatchSlot* m : members) {
    const int64_t waited = std::chrono::duration_cast<std::chrono::nanoseconds>(sent - m->joined).count();
    stats_.queue_nanoseconds += waited;
    stats_.round_trip_nanoseconds += waited;
  }
  if (members.size() == 1 && me.runs == 1) return BatchSlot::Outcome::single;  // nothing to batch: as usual
  ++stats_.batches;
  stats_.batched_cases += static_cast<int64_t>(members.size());
  for (const BatchSlot* m : members) stats_.batched_runs += static_cast<int64_t>(m->runs);
  BatchSlot::Outcome outcome = BatchSlot::Outcome::answered;
  try {
    const bool answered = call_server(
        "execute", [&](const std::string& dir) { write(dir, members); },
        [&](const std::string& dir, const nlohmann::json& answer) { read(dir, answer, members); }, variant,
        Attempt::shared_only, static_cast<int64_t>(members.size()));
    if (!answered) outcome = BatchSlot::Outcome::alone;
  } catch (const BackendUnsupported&) {
    outcome = BatchSlot::Outcome::single;  // the batch as a whole: each case asks by itself
  } catch (...) {
    outcome = BatchSlot::Outcome::alone;  // a server that did not start, a malformed answer: each case alone
  }
  // a batch cut off by the campaign's deadline (its server killed, its cases dropped) failed no one
  if (outcome == BatchSlot::Outcome::alone && !time_is_up()) ++stats_.batches_failed;
  lock.lock();
  for (BatchSlot* m : members) m->outcome = outcome;
  g->answered.notify_all();
  return outcome;
}

void Adapter::call(const std::string& op, const std::function<void(const std::string&)>& write,
                   const std::function<void(const std::string&, const nlohmann::json&)>& read,
                   const std::string& variant, bool alone) {
  refuse_when_time_is_up();
  if (!servers_.empty()) {
    call_server(op, write, read, variant, alone ? Attempt::alone : Attempt::shared_then_alone);
    return;
  }
  std::unique_ptr<AdapterProcess> p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      p = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (!p) {
    nlohmann::json hello;
    p = launch(&hello);
    const AdapterSpec again = parse_spec(hello, command_);
    if (again.name != spec_.name || again.family != spec_.family || again.role != spec_.role)
      throw BackendFailure("contract", "adapter '" + command_ + "' declared itself differently on restart");
  }
  const int64_t id = next_request_++;
  const RequestFolder folder = request_folder(p->dir() + "/request", op, id);
  const std::string& dir = folder.path;
  std::filesystem::create_directories(dir);
  ++stats_.requests;
  try {
    auto t0 = std::chrono::steady_clock::now();
    write(dir);
    stats_.kvfuzz_write_nanoseconds += nanoseconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    p->send({{"op", op}, {"id", id}, {"dir", dir}});
    const nlohmann::json answer = p->receive(timeout_);
    stats_.round_trip_nanoseconds += nanoseconds_since(t0);
    try {
      settle(answer, id, dir, read, !variant.empty() && answer.value("ok", false) && p->first_time(variant));
    } catch (const BackendUnsupported&) {
      remove_tree(dir);
      std::lock_guard<std::mutex> lock(mu_);
      idle_.push_back(std::move(p));  // not a failure: the worker stays
      throw;
    }
  } catch (const BackendFailure& e) {
    remove_tree(dir);
    if (e.property() == "hang") ++stats_.hangs;
    else if (e.property() == "crash" && !p->alive()) ++stats_.crashes;
    ++stats_.restarts;
    p.reset();  // discarded: the next request starts a fresh worker
    throw;
  } catch (const ContractError& e) {
    remove_tree(dir);
    ++stats_.restarts;
    p.reset();
    throw BackendFailure("contract", spec_.name + ": " + e.what());
  }
  if (!folder.reused) {
    const auto t0 = std::chrono::steady_clock::now();
    remove_tree(dir);
    stats_.kvfuzz_read_nanoseconds += nanoseconds_since(t0);
  }
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(std::move(p));
}

}  // namespace kvfuzz
