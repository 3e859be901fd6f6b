// Command-line values shared by several subcommands, checked once: --backend and --fault.
//
//   auto backends = select_backends("all");            // throws InvalidCase naming the flag
//   check_faults({"fa_local_token_table"}, backends);
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "backends/backend.h"
#include "backends/external/adapter.h"

namespace kvfuzz::cli {

// "all", a backend's name, or an adapter's name (every pair it forms).
std::vector<const Backend*> select_backends(const std::string& name);

// --adapter CMD (repeatable) and --adapter-timeout: external planners and executors
// (backends/contract/PROTOCOL.md), registered before backends are selected.
struct AdapterOptions {
  std::vector<std::string> commands;
  double timeout = AdapterOptionsDefaults::kTimeout;
  std::string servers = "0";  // --adapter-servers: "0" (per-job workers), N, "gpus" or "gpus:K"
  bool no_batch = false;      // --no-batch: servers send each case by itself
  int lanes = 1;              // --server-lanes: requests each server is offered to work on at once
};
// --adapter-servers's value as a layout: "gpus" is one server per visible GPU, "gpus:K" K per
// visible GPU (none visible: per-job workers); N servers take the visible GPUs in turn.
AdapterLayout adapter_layout(const std::string& servers, bool batch = true, int lanes = 1);
void add_adapter_options(CLI::App* cmd, AdapterOptions& options);
// Starts each adapter; throws InvalidCase naming the one that does not start or declares nonsense.
void register_adapters(const AdapterOptions& options);
// The --adapter flags that bring the same adapters back, for a replay line.
std::vector<std::string> adapter_flags(const AdapterOptions& options);


// For --seed: a decimal integer in [0, 2^64), nothing else (CLI11 would wrap "-3").
CLI::Validator seed_check();

// For --profile: one of generate.h's profiles (tiny, small, medium, large, long).
CLI::Validator profile_check();

// For counts and durations: a number >= 0 (non_negative) or > 0 (positive), with a message that
// says so (CLI11's own names the whole double range).
CLI::Validator non_negative();
CLI::Validator positive();

// Every fault must belong to one of `backends`.
void check_faults(const std::vector<std::string>& faults, const std::vector<const Backend*>& backends);

}  // namespace kvfuzz::cli
