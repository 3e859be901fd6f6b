// See executor_library.h.
#include "backends/external/worker/executor_library.h"

#include <dlfcn.h>

#include <vector>

namespace kvfuzz::worker {

void ExecutorLibrary::fail(const std::string& what) const { throw LibraryError("executor library '" + path_ + "' " + what); }

ExecutorLibrary::ExecutorLibrary(const std::string& path) : path_(path) {
  // dlopen searches the library path for a bare name; a file name means a file.
  const std::string file = path.find('/') == std::string::npos ? "./" + path : path;
  handle_ = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char* why = dlerror();
    fail(std::string("does not load: ") + (why ? why : "unknown dlopen error"));
  }
  auto symbol = [&](const char* name) {
    void* s = dlsym(handle_, name);
    if (!s) {
      dlclose(handle_);
      handle_ = nullptr;
      fail(std::string("does not export ") + name + " (kvfuzz_executor.h: declare it with KVFUZZ_EXPORT)");
    }
    return s;
  };
  declare_ = reinterpret_cast<kvfuzz_executor_declare_fn>(symbol("kvfuzz_executor_declare"));
  run_ = reinterpret_cast<kvfuzz_executor_run_fn>(symbol("kvfuzz_executor_run"));
}

// The library stays loaded until the process ends: unloading a CUDA library (or any with threads
// or atexit handlers) before exit can crash, and a worker loads exactly one.
ExecutorLibrary::~ExecutorLibrary() = default;

nlohmann::json ExecutorLibrary::declaration() const {
  std::vector<char> text(KVFUZZ_DECLARATION_CAPACITY, '\0');
  const int rc = declare_(text.data(), text.size());
  if (rc != 0) fail("kvfuzz_executor_declare returned " + std::to_string(rc));
  if (text.back() != '\0') fail("kvfuzz_executor_declare wrote no terminating NUL within " + std::to_string(text.size()) + " bytes");
  const std::string s(text.data());
  nlohmann::json j = nlohmann::json::parse(s, nullptr, false);
  if (j.is_discarded() || !j.is_object()) fail("declared something that is not a JSON object: " + s.substr(0, 200));
  auto need = [&](const char* key, bool ok, const std::string& expected) {
    if (!ok) fail(std::string("declared '") + key + "' as " + (j.contains(key) ? j[key].dump() : "nothing") + "; expected " + expected);
  };
  need("kvfuzz_adapter", j.contains("kvfuzz_adapter") && j["kvfuzz_adapter"] == 1, "1");
  need("name", j.contains("name") && j["name"].is_string() && !j["name"].get<std::string>().empty(), "a name");
  need("role", j.contains("role") && j["role"] == "executor", "\"executor\" (the C ABI serves executors)");
  need("family", j.contains("family") && j["family"].is_string(), "a family name such as \"page_table\"");
  need("thread_safe", !j.contains("thread_safe") || j["thread_safe"].is_boolean(), "true or false");
  return j;
}

}  // namespace kvfuzz::worker
