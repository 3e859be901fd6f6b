#include "backends/external/adapter_server.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "backends/common/backend_failure.h"

namespace kvfuzz {

using Clock = std::chrono::steady_clock;

AdapterServer::AdapterServer(std::string command, std::vector<std::string> env, double timeout)
    : command_(std::move(command)), env_(std::move(env)), timeout_(timeout) {}

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

int AdapterServer::load() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_;
}

bool AdapterServer::has_run(const std::string& variant) const {
  std::lock_guard<std::mutex> lock(mu_);
  return seen_.count(variant) > 0 || warmed_.count(variant) > 0;
}

bool AdapterServer::warming() const {
  std::lock_guard<std::mutex> lock(mu_);
  return warming_ > 0;
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
  if (hello_.is_null()) hello_ = hello;
  if (generation_ > 0) ++restarts_;
  process_ = std::move(p);
  ++generation_;
  dead_ = false;
  hung_id_ = -1;
  seen_.clear();
  last_answer_ = Clock::now();
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
    last_answer_ = Clock::now();
    if (Pending* next = head(); next && !next->started) next->started = last_answer_;
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

AdapterServer::Pending* AdapterServer::head(int64_t* id) {
  // The process answers in order: the oldest unanswered request is the one it works on.
  Pending* first = nullptr;
  for (auto& [i, p] : pending_)
    if (p.generation == generation_ && !p.answered && (!first || p.sent < first->sent)) {
      first = &p;
      if (id) *id = i;
    }
  return first;
}

void AdapterServer::check_hang(Clock::time_point now) {
  if (dead_ || !process_ || hung_id_ >= 0) return;
  int64_t id = -1;
  const Pending* h = head(&id);
  if (!h) return;
  // It works on it since the later of its sending and the last answer.
  const Clock::time_point started = std::max(h->sent, last_answer_);
  if (std::chrono::duration<double>(now - started).count() <= timeout_) return;
  hung_id_ = id;
  process_->signal_kill();
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
  const bool idle = head() == nullptr;
  Pending& mine = pending_[id] = Pending{generation, Clock::now(), std::nullopt, false, nullptr};
  if (idle) mine.started = mine.sent;
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
