// An executor shared library loaded through the C ABI (backends/external/kvfuzz_executor.h).
//
// Where it sits: kvfuzz-worker (worker_main.cc) loads one at start and asks for its declaration
// before speaking to kvfuzz; a library that does not load, lacks a symbol or declares nonsense is
// bad input, reported as LibraryError naming the library (the worker prints it and exits 2).
//
//   ExecutorLibrary lib("build/adapters/libcpp_page_table.so");   // throws LibraryError
//   nlohmann::json hello = lib.declaration();                     // checked, sent as the first line
//   int rc = lib.run(call);
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "backends/external/kvfuzz_executor.h"

namespace kvfuzz::worker {

class LibraryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ExecutorLibrary {
 public:
  explicit ExecutorLibrary(const std::string& path);
  ~ExecutorLibrary();
  ExecutorLibrary(const ExecutorLibrary&) = delete;
  ExecutorLibrary& operator=(const ExecutorLibrary&) = delete;

  // The library's declaration, checked as far as the worker can: a JSON object with
  // "kvfuzz_adapter": 1, a name, role "executor" and a family (kvfuzz checks the rest).
  nlohmann::json declaration() const;
  int run(const kvfuzz_call& call) const { return run_(&call); }
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(const std::string& what) const;

  std::string path_;
  void* handle_ = nullptr;
  kvfuzz_executor_declare_fn declare_ = nullptr;
  kvfuzz_executor_run_fn run_ = nullptr;
};

}  // namespace kvfuzz::worker
