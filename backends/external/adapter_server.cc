#include "backends/external/adapter_server.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "backends/common/backend_failure.h"

namespace kvfuzz {

using Clock = std::chrono::steady_clock;

namespace {

std::vector<std::string> with_lanes(std::vector<std::string> env, int lanes) {
  if (lanes > 1) env.push_back("KVFUZZ_ADAPTER_LANES=" + std::to_string(lanes));
  return env;
}

}  // namespace

AdapterServer::AdapterServer(std::string command, std::vector<std::string> env, double timeout, int lanes,
                             std::function<void()> released)
    : command_(std::move(command)),
      env_(with_lanes(std::move(env), lanes)),
      timeout_(timeout),
      offered_lanes_(lanes),
      released_(std::move(released)) {}

void AdapterServer::ask_exit() {
  std::lock_guard<std::mutex> lock(mu_);
  if (exit_by_) return;
  if (process_ && !dead_) process_->try_send({{"op", "exit"}});
  exit_by_ = Clock::now() + std::chrono::seconds(5);
}

void AdapterServer::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
  if (starting_process_) starting_process_->signal_kill();  // its hello never comes: the start fails
  if (process_ && !dead_) {
    process_->signal_kill();
    dead_ = true;  // its reader ends once the kill lands; requests in flight give up
    death_ = "the campaign's time was up: adapter '" + command_ + "' was stopped";
    death_property_ = "stopped";
  }
  cv_.notify_all();
}

AdapterServer::~AdapterServer() {
  ask_exit();
  std::unique_lock<std::mutex> lock(mu_);
  if (process_ && !dead_) {
    // Asked politely (compute-sanitizer and the adapter's own log flush at exit), then make sure.
    cv_.wait_until(lock, *exit_by_, [&] { return dead_; });
    if (!dead_) process_->signal_kill();
  }
  lock.unlock();
  if (reader_.joinable()) reader_.join();
}

void AdapterServer::abandon_start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (starting_process_) starting_process_->signal_kill();
}

nlohmann::json AdapterServer::hello() {
  std::unique_lock<std::mutex> lock(mu_);
  if (hello_.is_null()) ensure_running(lock);
  return hello_;
}

bool AdapterServer::has_run(const std::string& variant) const {
  std::lock_guard<std::mutex> lock(mu_);
  return seen_.count(variant) > 0 || warmed_.count(variant) > 0;
}

uint64_t AdapterServer::ensure_running(std::unique_lock<std::mutex>& lock) {
  while (true) {  // stopped_ again after each wait: a start that ended at the deadline is not retried
    if (stopped_) throw BackendFailure("stopped", "the campaign's time was up: adapter '" + command_ + "' was stopped");
    if (process_ && !dead_) return generation_;
    if (!starting_) break;
    cv_.wait(lock);
  }
  starting_ = true;
  std::unique_ptr<AdapterProcess> old = std::move(process_);
  std::thread old_reader = std::move(reader_);
  lock.unlock();
  if (old_reader.joinable()) old_reader.join();  // the old process is dead or killed: its reader ends
  old.reset();
  std::unique_ptr<AdapterProcess> p;
  nlohmann::json hello;
  try {
    p = std::make_unique<AdapterProcess>(command_, make_exchange_dir("server"), env_);
    lock.lock();
    starting_process_ = p.get();
    const bool stop_now = stopped_;
    lock.unlock();
    if (stop_now) p->signal_kill();
    hello = p->receive(timeout_);
  } catch (...) {
    if (!lock.owns_lock()) lock.lock();
    starting_process_ = nullptr;
    starting_ = false;
    cv_.notify_all();
    if (stopped_) throw BackendFailure("stopped", "the campaign's time was up: adapter '" + command_ + "' was stopped");
    throw;
  }
  lock.lock();
  starting_process_ = nullptr;
  starting_ = false;
  cv_.notify_all();
  if (stopped_) {  // the campaign's time ran out as its hello came: it serves no one
    p->signal_kill();
    throw BackendFailure("stopped", "the campaign's time was up: adapter '" + command_ + "' was stopped");
  }
  if (!hello_.is_null())
    for (const char* field : {"name", "family", "role"})
      if (hello.value(field, nlohmann::json()) != hello_.value(field, nlohmann::json()))
        throw BackendFailure("contract", "adapter '" + command_ + "' declared itself differently on restart");
  // "lanes": how many requests it works on at once, at most the lanes offered; absent: one.
  const nlohmann::json lanes = hello.value("lanes", nlohmann::json(1));
  if (!lanes.is_number_integer() || lanes.get<int64_t>() < 1 || lanes.get<int64_t>() > std::max(1, offered_lanes_)) {
    p->signal_kill();
    throw BackendFailure("contract", "adapter '" + command_ + "' declared \"lanes\": " + lanes.dump() +
                                         "; expected an integer from 1 to the lanes offered (KVFUZZ_ADAPTER_LANES=" +
                                         std::to_string(std::max(1, offered_lanes_)) + ")");
  }
  if (hello_.is_null()) hello_ = hello;
  lanes_ = lanes.get<int>();
  if (generation_ > 0) ++restarts_;
  process_ = std::move(p);
  ++generation_;
  dead_ = false;
  hung_id_ = -1;
  seen_.clear();
  reader_ = std::thread(&AdapterServer::read_answers, this, generation_, process_.get());
  return generation_;
}

void AdapterServer::read_answers(uint64_t generation, AdapterProcess* process) {
  std::string property = "crash", message;
  while (true) {
    nlohmann::json answer;
    try {
      answer = process->receive(1e9);  // the hang watch (check_hang) kills, not this timeout
    } catch (const BackendFailure& e) {
      property = e.property();
      message = e.what();
      break;
    }
    std::lock_guard<std::mutex> lock(mu_);
    const nlohmann::json id = answer.value("id", nlohmann::json());
    const auto it = id.is_number_integer() ? pending_.find(id.get<int64_t>()) : pending_.end();
    if (it == pending_.end() || it->second.generation != generation) {
      property = "contract";
      message = "adapter '" + command_ + "' answered request " + id.dump() + ", which is not in flight";
      break;
    }
    it->second.answered = true;
    it->second.answer = std::move(answer);
    running(Clock::now());  // the answer freed a lane: the next request in line starts now
    cv_.notify_all();
  }
  process->kill();  // it died (receive reaped it) or broke the protocol: make sure, close the pipes
  std::lock_guard<std::mutex> lock(mu_);
  if (generation_ != generation) return;
  if (hung_id_ >= 0) {
    property = "hang";
    message = process->hang_message(timeout_);
  }
  dead_ = true;
  death_ = message;
  death_property_ = property;
  cv_.notify_all();
}

std::vector<std::pair<int64_t, AdapterServer::Pending*>> AdapterServer::running(Clock::time_point now) {
  // The process takes requests up in the order they came, lanes_ at a time: the oldest unanswered
  // ones are those it works on. Each started when it entered this window: at its sending, or at the
  // answer that freed its lane.
  std::vector<std::pair<int64_t, Pending*>> window;
  for (auto& [i, p] : pending_)
    if (p.generation == generation_ && !p.answered) window.emplace_back(i, &p);
  const size_t lanes = static_cast<size_t>(std::max(1, lanes_.load()));
  const auto by_order = [](const auto& a, const auto& b) { return a.second->order < b.second->order; };
  if (window.size() > lanes) {
    std::partial_sort(window.begin(), window.begin() + static_cast<std::ptrdiff_t>(lanes), window.end(), by_order);
    window.resize(lanes);
  }
  for (auto& [i, p] : window)
    if (!p->started) p->started = now;
  return window;
}

void AdapterServer::check_hang(Clock::time_point now) {
  if (dead_ || !process_ || hung_id_ >= 0) return;
  for (const auto& [id, p] : running(now)) {
    if (std::chrono::duration<double>(now - *p->started).count() <= timeout_) continue;
    hung_id_ = id;  // the first found: any request running past the timeout is a hang
    process_->signal_kill();
    return;
  }
}

void AdapterServer::retire_locked(uint64_t generation) {
  if (generation != generation_ || dead_ || !process_) return;
  process_->signal_kill();
  dead_ = true;  // no new request goes to it; its reader ends once the kill lands
  death_ = "adapter '" + command_ + "' was restarted after a failed request";
  death_property_ = "crash";
  cv_.notify_all();
}

AdapterServer::Reply AdapterServer::request(const nlohmann::json& message, const std::string& variant, bool alone,
                                            bool warm_up) {
  const Clock::time_point entered = Clock::now();
  // Destroyed after `lock` (declared before it): tells of the release outside the lock.
  struct Released {
    const std::function<void()>& f;
    ~Released() {
      if (f) f();
    }
  } const released{released_};
  std::unique_lock<std::mutex> lock(mu_);
  ++waiting_;
  if (warm_up) ++warming_;
  if (alone) {
    ++exclusive_waiting_;
    cv_.wait(lock, [&] { return !exclusive_ && shared_ == 0; });
    --exclusive_waiting_;
    exclusive_ = true;
  } else {
    cv_.wait(lock, [&] { return !exclusive_ && exclusive_waiting_ == 0; });
    ++shared_;
  }
  auto release = [&] {
    --waiting_;
    if (warm_up) --warming_;
    if (alone) exclusive_ = false;
    else --shared_;
    cv_.notify_all();
  };
  uint64_t generation = 0;
  try {
    generation = ensure_running(lock);
  } catch (...) {
    release();
    throw;
  }
  const int64_t id = message.at("id").get<int64_t>();
  const Pending& mine = pending_[id] = Pending{generation, Clock::now(), next_order_++, std::nullopt, false, nullptr};
  running(mine.sent);  // a free lane takes it up at once
  const bool first = !variant.empty() && !warm_up && seen_.insert(variant).second;
  if (warm_up) warmed_.insert(variant);
  // Under the lock: the process cannot be replaced meanwhile. A failed write is a death its
  // reader sees.
  process_->try_send(message);
  while (true) {
    Pending& p = pending_.at(id);
    if (p.answered) {
      const double queued = std::chrono::duration<double>(p.started.value_or(p.sent) - entered).count();
      Reply r{std::move(p.answer), generation, first, queued};
      pending_.erase(id);
      // A failed answer: the process's context may be poisoned. Retired before this request
      // gives up its turn, so that no request alone can start on it in between.
      if (!r.answer.value("ok", false) && !r.answer.contains("unsupported")) retire_locked(generation);
      release();
      return r;
    }
    if (generation_ != generation || dead_) {
      pending_.erase(id);
      const std::string why = death_, property = hung_id_ == id ? "hang" : death_property_;
      release();
      if (alone) throw BackendFailure(property, why);
      throw ServerLost(why);
    }
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    check_hang(Clock::now());
  }
}

std::vector<std::string> visible_gpus() {
  std::vector<std::string> gpus;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::stringstream ss(v);
    std::string item;
    while (std::getline(ss, item, ','))
      if (!item.empty() && item != "-1") gpus.push_back(item);
    return gpus;
  }
  FILE* f = popen("nvidia-smi -L 2>/dev/null", "r");
  if (!f) return gpus;
  char line[512];
  while (std::fgets(line, sizeof line, f))
    if (std::string(line).rfind("GPU ", 0) == 0) gpus.push_back(std::to_string(gpus.size()));
  pclose(f);
  return gpus;
}

}  // namespace kvfuzz
