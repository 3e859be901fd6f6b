// How much of the configuration space a campaign has touched.
//
// Where it sits: campaigns record each case here and print it on the progress line. A cell is one
// combination of the choices that change which metadata code runs: forward mode, the set of layer
// kinds, the page-size class (1, small power of two, large power of two, odd), hybrid SWA pool,
// CUDA-graph padding, topk > 1, MLA. Single dimensions are reported too, so a person sees at once
// what was never exercised.
//
//   Coverage c;
//   c.add(scenario);
//   std::cout << c.line();   // "modes 7/7, layer kinds 3/3, page sizes 9/13, cells 214"
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "reference/scenario.h"

namespace kvfuzz {

// The features a case exercises, by name (hybrid, graph, tree, mla, softcap, gqa, swa-evict,
// spec-history, adaptive-splits): what the coverage line counts and the campaign report shows.
//   for (const std::string& f : case_features(s)) ...
std::vector<std::string> case_features(const Scenario& s);
// Every name case_features can return, in that order.
const std::vector<std::string>& case_feature_names();

class Coverage {
 public:
  void add(const Scenario& s);
  void merge(const Coverage& other);
  std::string line() const;
  // What was touched, as campaign.json keeps it ("touched"), so that `kvfuzz merge` can join the
  // shards' coverage; from_json throws nlohmann::json::exception on a malformed object.
  nlohmann::json to_json() const;
  static Coverage from_json(const nlohmann::json& j);
  int64_t cells() const { return static_cast<int64_t>(cells_.size()); }

 private:
  std::set<uint32_t> cells_;
  std::set<int> modes_, layer_kinds_, page_sizes_;
  std::set<std::string> features_;
};

}  // namespace kvfuzz
