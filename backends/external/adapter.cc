#include "backends/external/adapter.h"

#include <chrono>
#include <filesystem>
#include <optional>

#include "backends/common/backend_failure.h"
#include "backends/contract/npy.h"

namespace kvfuzz {
namespace {

int64_t nanoseconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
}

// Adds a non-negative number of seconds at answer[a][b] (absent or not a number: nothing) to `to`.
void add_seconds(const nlohmann::json& answer, const char* a, const char* b, std::atomic<int64_t>& to) {
  if (answer.contains(a) && answer[a].is_object() && answer[a].contains(b) && answer[a][b].is_number() &&
      answer[a][b].get<double>() > 0)
    to += static_cast<int64_t>(answer[a][b].get<double>() * 1e9);
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
        a->servers_.push_back(std::make_unique<AdapterServer>(command, env, timeout));
      }
      hello = a->servers_.front()->hello();  // the first server starts: its declaration
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
  servers_.clear();
  if (!requests_dir_.empty()) remove_tree(requests_dir_);
}

int64_t Adapter::server_restarts() const {
  int64_t n = 0;
  for (const auto& s : servers_) n += s->restarts();
  return n;
}

void Adapter::settle(const nlohmann::json& answer, int64_t id, const std::string& dir,
                     const std::function<void(const std::string&, const nlohmann::json&)>& read, bool first) {
  add_seconds(answer, "timing", "serve", stats_.serve_nanoseconds);
  add_seconds(answer, "timing", "read", stats_.adapter_read_nanoseconds);
  add_seconds(answer, "timing", "write", stats_.adapter_write_nanoseconds);
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
  stats_.function_nanoseconds += function_ns;
  if (first) stats_.first_call_nanoseconds += function_ns;
  const auto t0 = std::chrono::steady_clock::now();
  read(dir, answer);
  stats_.kvfuzz_read_nanoseconds += nanoseconds_since(t0);
}

// A failed answer or a lost request on a shared process is not yet the case's: the server retires
// the process (its CUDA context may be poisoned) and the case is re-run alone, whose outcome is its own.
void Adapter::call_server(const std::string& op, const std::function<void(const std::string&)>& write,
                          const std::function<void(const std::string&, const nlohmann::json&)>& read,
                          const std::string& variant) {
  AdapterServer* server = servers_.front().get();
  for (const auto& s : servers_)
    if (s->load() < server->load()) server = s.get();
  const int64_t id = next_request_++;
  const std::string dir = requests_dir_ + "/r" + std::to_string(id);
  std::filesystem::create_directories(dir);
  ++stats_.requests;
  auto failed = [](const nlohmann::json& a) { return !a.value("ok", false) && !a.contains("unsupported"); };
  try {
    auto t0 = std::chrono::steady_clock::now();
    write(dir);
    stats_.kvfuzz_write_nanoseconds += nanoseconds_since(t0);
    const nlohmann::json message = {{"op", op}, {"id", id}, {"dir", dir}};
    t0 = std::chrono::steady_clock::now();
    std::optional<AdapterServer::Reply> reply;
    try {
      reply = server->request(message, variant, false);
      if (failed(reply->answer)) reply.reset();  // its process was retired: re-run alone below
    } catch (const ServerLost&) {
      // its process died or was killed before answering: re-run alone below
    }
    if (!reply) {
      ++stats_.reruns;
      try {
        reply = server->request(message, variant, true);
      } catch (const BackendFailure& e) {
        ++stats_.reruns_failed;
        if (e.property() == "hang") ++stats_.hangs;
        else if (e.property() == "crash") ++stats_.crashes;
        throw;
      }
      if (failed(reply->answer)) ++stats_.reruns_failed;
    }
    stats_.round_trip_nanoseconds += nanoseconds_since(t0);
    stats_.queue_nanoseconds += static_cast<int64_t>(reply->queued * 1e9);
    settle(reply->answer, id, dir, read, reply->first_time);
  } catch (const ContractError& e) {
    remove_tree(dir);
    throw BackendFailure("contract", spec_.name + ": " + e.what());
  } catch (...) {
    remove_tree(dir);
    throw;
  }
  const auto t0 = std::chrono::steady_clock::now();
  remove_tree(dir);
  stats_.kvfuzz_read_nanoseconds += nanoseconds_since(t0);
}

void Adapter::call(const std::string& op, const std::function<void(const std::string&)>& write,
                   const std::function<void(const std::string&, const nlohmann::json&)>& read,
                   const std::string& variant) {
  if (!servers_.empty()) return call_server(op, write, read, variant);
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
  const std::string dir = p->dir() + "/r" + std::to_string(id);
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
  const auto t0 = std::chrono::steady_clock::now();
  remove_tree(dir);
  stats_.kvfuzz_read_nanoseconds += nanoseconds_since(t0);
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(std::move(p));
}

}  // namespace kvfuzz
