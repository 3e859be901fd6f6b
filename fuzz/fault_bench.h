// The fault benchmark: how fast the suite catches each named planner fault, and how small the
// shrunk case gets.
//
// Where it sits: `kvfuzz faults`, run by CI. For every fault of every backend it runs generated
// cases with the fault switched on until a property fails (at most `budget` cases the backend
// supports; unsupported ones are counted apart), confirms the same case passes with the fault off
// (else the suite, not the fault, is wrong), shrinks it while it fails the same way (by a general
// property where one fails), and saves the shrunk case and that property (the
// corpus/regressions/ cases, regression_property.h) with the command line that replays it.
//
//   auto results = run_fault_bench({.budget = 2000, .out_dir = "faults"}, std::cerr);
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "fuzz/reductions.h"

namespace kvfuzz {

struct FaultBenchOptions {
  int64_t budget = 2000;  // cases per fault
  uint64_t seed = 1;
  double shrink_seconds = 30;
  std::string out_dir;    // where shrunk cases go; empty: not saved
  std::vector<const Backend*> backends;
  std::vector<std::string> only;  // fault names; empty: all
};

struct FaultResult {
  std::string backend, fault;
  bool detected = false;
  int64_t cases = 0;        // supported cases run until the first detection (or the budget)
  int64_t unsupported = 0;  // generated cases the backend does not support (not counted)
  double seconds = 0;
  std::string property;  // the first general property that failed (regression_property.h), else
                         // the first finding's
  bool clean_without_fault = false;
  CaseSize shrunk;
  double shrink_seconds = 0;
  std::string file;
};

std::vector<FaultResult> run_fault_bench(const FaultBenchOptions& options, std::ostream& progress);

void print_fault_table(const std::vector<FaultResult>& results, std::ostream& out);

}  // namespace kvfuzz
