// Root-cause groups per planted fault: how many groups one bug's findings fall into, and whether
// two different faults ever share one (properties/root_cause.h).
//
// Where it sits: `kvfuzz faults --groups N`, beside the fault benchmark (fault_bench.h). For every
// named fault it runs an N-case campaign of tiny cases over the fault's backend with the fault on
// (no shrinking, into a scratch folder), and counts the fingerprint keys (what triage saw before
// root causes) and the root-cause groups (after). A fault whose findings fall into more than
// `max_groups` groups, or a group two faults of one backend share, fails the run.
//
//   auto rows = run_fault_groups({.cases = 300, .backends = all_backends()}, std::cerr);
//   print_fault_groups(rows, 3, std::cout);   // false: a fault over 3 groups, or a shared group
#pragma once

#include <cstdint>
#include <iosfwd>
#include <set>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace kvfuzz {

struct FaultGroupsOptions {
  int64_t cases = 300;
  uint64_t seed = 1;
  std::vector<const Backend*> backends;
  std::vector<std::string> only;  // fault names; empty: all
  int jobs = 2;
};

struct FaultGroups {
  std::string backend, fault;
  int64_t cases_with_findings = 0;
  std::set<std::string> keys;    // fingerprint keys
  std::set<std::string> groups;  // root keys
};

std::vector<FaultGroups> run_fault_groups(const FaultGroupsOptions& options, std::ostream& progress);

// The table (fault, backend, cases with findings, keys, groups), each fault's groups, and the
// groups shared by two faults of one backend. Returns whether every fault has at most
// `max_groups` groups and no group is shared.
bool print_fault_groups(const std::vector<FaultGroups>& rows, size_t max_groups, std::ostream& out);

}  // namespace kvfuzz
