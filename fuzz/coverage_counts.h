// How many cases each backend checked, per forward mode x layer kind, page size and feature.
//
// Where it sits: beside coverage.h (which counts what was touched at all); a campaign adds every
// case here with the backends that did not answer it unsupported, campaign_record.h writes the
// counts to DIR/campaign.json, and `kvfuzz report` draws them as a heat map. A case with several
// layer kinds counts once under each kind.
//
//   CoverageCounts c;
//   c.add(scenario, {"fa", "triton"});                  // the backends that checked it
//   c.by_backend.at("fa").mode_layer["decode"]["sliding_window"];   // cases
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "reference/scenario.h"

namespace kvfuzz {

struct BackendCoverage {
  int64_t cases = 0;
  std::map<std::string, std::map<std::string, int64_t>> mode_layer;  // [mode][layer kind] -> cases
  std::map<int32_t, int64_t> page_sizes;                             // [page size] -> cases
  std::map<std::string, int64_t> features;                           // [case_features name] -> cases
};

struct CoverageCounts {
  static constexpr const char* kAllCases = "(all cases)";  // every case generated, checked or not
  std::map<std::string, BackendCoverage> by_backend;

  // Counts `s` for kAllCases and for each backend in `checked`.
  void add(const Scenario& s, const std::vector<std::string>& checked);
  // Adds another run's counts (the shards of a campaign, `kvfuzz merge`).
  void merge(const CoverageCounts& other);
};

// One backend's counts as campaign.json keeps them, and back (throws nlohmann::json::exception or
// std::invalid_argument on a malformed object).
nlohmann::json to_json(const BackendCoverage& c);
BackendCoverage backend_coverage_from_json(const nlohmann::json& j);

// The backends of `backends` that `unsupported` ("backend: why", CaseReport::unsupported) does not name.
std::vector<std::string> backends_checked(const std::vector<const Backend*>& backends,
                                          const std::vector<std::string>& unsupported);

}  // namespace kvfuzz
