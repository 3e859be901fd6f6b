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
