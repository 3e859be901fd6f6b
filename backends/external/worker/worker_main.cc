// kvfuzz-worker: runs an executor shared library written against the C ABI
// (backends/external/kvfuzz_executor.h) as a kvfuzz adapter.
//
// Where it sits: the C/C++/CUDA counterpart of adapters/kvfuzz_adapter/serve.py, speaking the same
// protocol: kvfuzz starts it as a child process with KVFUZZ_ADAPTER_FDS=3,4; it writes the
// library's declaration as its first line on fd 4, then answers each {"op":"execute","id":N,
// "dir":D} line from fd 3 with {"id":N,"ok":...,"seconds":{set: t},"timing":{...}} until {"op":"exit"}.
//
//   kvfuzz run --backend cpp_page_table
//              --adapter "build/backends/kvfuzz-worker build/adapters/libcpp_page_table.so"
//
// Lanes: when kvfuzz offers them (KVFUZZ_ADAPTER_LANES=K, `--server-lanes`) and the library
// declares "thread_safe": true (kvfuzz_executor.h), it declares "lanes": K and answers up to K
// requests at once: this thread reads the request lines into a queue, K threads take them up in
// order and each writes its answer line whole, under a lock (PROTOCOL.md "lanes").
//
// A library that does not load, lacks a symbol or declares nonsense: a message naming it on
// stderr and exit 2, before any declaration (kvfuzz reports that the adapter did not start).
#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/external/worker/execute_request.h"
#include "backends/external/worker/executor_library.h"

namespace {

using kvfuzz::worker::ExecutorLibrary;

constexpr const char* kUsage =
    "usage: kvfuzz-worker path/to/libexecutor.so\n"
    "Runs an executor library (backends/external/kvfuzz_executor.h) as a kvfuzz adapter; kvfuzz starts it:\n"
    "  kvfuzz run --adapter \"kvfuzz-worker path/to/libexecutor.so\" --backend NAME\n";

bool send(int fd, const nlohmann::json& message) {
  const std::string line = message.dump() + "\n";
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = write(fd, line.data() + done, line.size() - done);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

nlohmann::json answer(const ExecutorLibrary& library, const nlohmann::json& request) {
  const auto start = std::chrono::steady_clock::now();
  nlohmann::json a = {{"id", request.value("id", nlohmann::json())}};
  try {
    if (request.value("op", "") != "execute")
      throw std::runtime_error("kvfuzz-worker serves executors; it cannot answer op " + request.value("op", nlohmann::json()).dump());
    const kvfuzz::worker::ExecuteResult r = execute_request(library, request.at("dir").get<std::string>());
    a["seconds"] = r.seconds;
    a["timing"] = {{"read", r.read_seconds}, {"write", r.write_seconds}};
    if (!r.violations.empty()) {
      std::string all;
      for (const std::string& v : r.violations) all += (all.empty() ? "" : "; ") + v;
      a.update({{"ok", false}, {"property", "in-bounds"}, {"error", library.path() + ": " + all}});
    } else if (!r.unsupported.empty()) {
      a.update({{"ok", false}, {"unsupported", r.unsupported}});
    } else if (!r.error.empty()) {
      a.update({{"ok", false}, {"error", library.path() + ": " + r.error}});
    } else {
      a["ok"] = true;
    }
  } catch (const std::exception& e) {
    a.update({{"ok", false}, {"error", std::string("kvfuzz-worker: ") + e.what()}});
  }
  a["timing"]["serve"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return a;
}

// The request lines, in the order they came, for the lanes' threads; empty and closed: none more.
class RequestQueue {
 public:
  void push(nlohmann::json request) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(request));
    cv_.notify_one();
  }
  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }
  std::optional<nlohmann::json> pop() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return closed_ || !queue_.empty(); });
    if (queue_.empty()) return std::nullopt;
    nlohmann::json r = std::move(queue_.front());
    queue_.pop_front();
    return r;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<nlohmann::json> queue_;
  bool closed_ = false;
};

// KVFUZZ_ADAPTER_LANES (1 when unset or not a number from 1 to 999).
int offered_lanes() {
  const char* v = std::getenv("KVFUZZ_ADAPTER_LANES");
  if (!v) return 1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return end != v && *end == '\0' && n >= 1 && n < 1000 ? static_cast<int>(n) : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::cout << kUsage;
    return 0;
  }
  if (argc != 2) {
    std::cerr << kUsage;
    return 2;
  }
  const char* fds = std::getenv("KVFUZZ_ADAPTER_FDS");
  int in_fd = -1, out_fd = -1;
  if (!fds || std::sscanf(fds, "%d,%d", &in_fd, &out_fd) != 2) {
    std::cerr << "kvfuzz-worker: KVFUZZ_ADAPTER_FDS is not set: kvfuzz starts this worker and talks to it on fds 3 and 4.\n"
              << kUsage;
    return 2;
  }
  std::unique_ptr<ExecutorLibrary> library;
  nlohmann::json declaration;
  try {
    library = std::make_unique<ExecutorLibrary>(argv[1]);
    declaration = library->declaration();
  } catch (const std::exception& e) {
    std::cerr << "kvfuzz-worker: " << e.what() << "\n";
    return 2;
  }
  // Each request allocates its arrays' buffers anew (guarded_buffer.h): kept on the heap and not
  // handed back between requests, they are reused, where glibc's defaults map arrays above 128 KiB
  // afresh, fault in their pages and unmap them again every request.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  const int lanes = declaration.value("thread_safe", false) ? offered_lanes() : 1;
  declaration.erase("thread_safe");
  if (lanes > 1) declaration["lanes"] = lanes;
  if (!send(out_fd, declaration)) return 1;
  FILE* requests = fdopen(in_fd, "r");
  if (!requests) return 1;
  char* line = nullptr;
  size_t capacity = 0;
  RequestQueue queue;
  std::mutex write_mu;
  bool broken = false;  // an answer could not be written: kvfuzz is gone
  std::vector<std::thread> threads;
  for (int i = 0; i < lanes && lanes > 1; ++i)
    threads.emplace_back([&] {
      while (std::optional<nlohmann::json> request = queue.pop()) {
        const nlohmann::json a = answer(*library, *request);
        std::lock_guard<std::mutex> lock(write_mu);
        std::fflush(stdout);
        std::cerr.flush();
        if (!broken && !send(out_fd, a)) broken = true;
      }
    });
  while (getline(&line, &capacity, requests) > 0) {
    const nlohmann::json request = nlohmann::json::parse(line, nullptr, false);
    if (request.is_discarded() || !request.is_object()) {
      std::cerr << "kvfuzz-worker: ignoring a request that is not a JSON object: " << line;
      continue;
    }
    if (request.value("op", "") == "exit") break;
    if (lanes > 1) {
      queue.push(request);
      continue;
    }
    const nlohmann::json a = answer(*library, request);
    std::fflush(stdout);
    std::cerr.flush();
    if (!send(out_fd, a)) break;
  }
  queue.close();  // exit (or the channel closed): the lanes answer what is queued, then end
  for (std::thread& t : threads) t.join();
  std::free(line);
  return 0;
}
