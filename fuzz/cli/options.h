// Command-line values shared by several subcommands, checked once: --backend and --fault.
//
//   auto backends = select_backends("all");            // throws InvalidCase naming the flag
//   check_faults({"fa_local_token_table"}, backends);
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "backends/backend.h"

namespace kvfuzz::cli {

std::vector<const Backend*> select_backends(const std::string& name);

// For --seed: a decimal integer in [0, 2^64), nothing else (CLI11 would wrap "-3").
CLI::Validator seed_check();

// For counts and durations: a number >= 0 (non_negative) or > 0 (positive), with a message that
// says so (CLI11's own names the whole double range).
CLI::Validator non_negative();
CLI::Validator positive();

// Every fault must belong to one of `backends`.
void check_faults(const std::vector<std::string>& faults, const std::vector<const Backend*>& backends);

}  // namespace kvfuzz::cli
