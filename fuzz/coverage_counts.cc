#include "fuzz/coverage_counts.h"

#include <algorithm>
#include <set>

#include "fuzz/coverage.h"

namespace kvfuzz {

void CoverageCounts::add(const Scenario& s, const std::vector<std::string>& checked) {
  std::set<std::string> kinds;
  for (const Layer& l : s.model.layers) kinds.insert(to_string(l.kind));
  const std::string mode = to_string(s.batch.mode);
  const std::vector<std::string> features = case_features(s);
  auto count = [&](BackendCoverage& c) {
    c.cases++;
    for (const std::string& k : kinds) c.mode_layer[mode][k]++;
    c.page_sizes[s.cache.page_size]++;
    for (const std::string& f : features) c.features[f]++;
  };
  count(by_backend[kAllCases]);
  for (const std::string& b : checked) count(by_backend[b]);
}

void CoverageCounts::merge(const CoverageCounts& other) {
  for (const auto& [name, o] : other.by_backend) {
    BackendCoverage& c = by_backend[name];
    c.cases += o.cases;
    for (const auto& [mode, kinds] : o.mode_layer)
      for (const auto& [kind, n] : kinds) c.mode_layer[mode][kind] += n;
    for (const auto& [ps, n] : o.page_sizes) c.page_sizes[ps] += n;
    for (const auto& [f, n] : o.features) c.features[f] += n;
  }
}

nlohmann::json to_json(const BackendCoverage& c) {
  nlohmann::json pages = nlohmann::json::object();
  for (const auto& [ps, n] : c.page_sizes) pages[std::to_string(ps)] = n;
  return {{"cases", c.cases}, {"mode_layer", c.mode_layer}, {"page_sizes", pages}, {"features", c.features}};
}

BackendCoverage backend_coverage_from_json(const nlohmann::json& j) {
  BackendCoverage b;
  b.cases = j.value("cases", int64_t{0});
  b.mode_layer = j.at("mode_layer").get<std::map<std::string, std::map<std::string, int64_t>>>();
  for (const auto& [ps, n] : j.at("page_sizes").items()) b.page_sizes[std::stoi(ps)] = n.get<int64_t>();
  b.features = j.at("features").get<std::map<std::string, int64_t>>();
  return b;
}

std::vector<std::string> backends_checked(const std::vector<const Backend*>& backends,
                                          const std::vector<std::string>& unsupported) {
  std::vector<std::string> out;
  for (const Backend* backend : backends) {
    const std::string b(backend->name());
    const bool skipped = std::any_of(unsupported.begin(), unsupported.end(),
                                     [&](const std::string& u) { return u.substr(0, u.find(": ")) == b; });
    if (!skipped) out.push_back(b);
  }
  return out;
}

}  // namespace kvfuzz
