#include "fuzz/report_heatmap.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>
#include <vector>

#include "fuzz/coverage.h"
#include "fuzz/report_html.h"

namespace kvfuzz {
namespace {

constexpr int kModes = 8;  // Mode::idle .. Mode::draft_q_only
const std::vector<std::string> kLayerKinds = {"full", "sliding_window", "chunked"};
const std::vector<std::string> kLayerShort = {"F", "SW", "C"};

// The backends in row order: every case first, then by name.
std::vector<std::string> rows(const CoverageCounts& c) {
  std::vector<std::string> out;
  if (c.by_backend.count(CoverageCounts::kAllCases)) out.push_back(CoverageCounts::kAllCases);
  for (const auto& [name, b] : c.by_backend)
    if (name != CoverageCounts::kAllCases) out.push_back(name);
  return out;
}

void cell(std::ostream& os, int64_t n, int64_t row_max) {
  if (n == 0) {
    os << "<td class=zero title=\"none checked\">&middot;</td>";
    return;
  }
  const double share =
      row_max > 1 ? std::log1p(static_cast<double>(n)) / std::log1p(static_cast<double>(row_max)) : 1.0;
  const int lightness = static_cast<int>(std::lround(95 - 58 * share));
  char style[96];
  std::snprintf(style, sizeof style, "background:hsl(212,72%%,%d%%);color:%s", lightness,
                lightness < 62 ? "#fff" : "#1d2330");
  os << "<td style=\"" << style << "\" title=\"" << n << " cases\">" << n << "</td>";
}

// One heat map: a row per backend, a column per `columns` entry, `value(backend, column)` cases.
void table(std::ostream& os, const ReportInput& in, const std::string& head, const std::vector<std::string>& columns,
           const std::function<int64_t(const BackendCoverage&, size_t)>& value, const std::string& column_head = "") {
  os << "<table class=heat>" << column_head << "<tr><th class=name>" << head << "</th>";
  for (const std::string& c : columns) os << "<th>" << html_escape(c) << "</th>";
  os << "</tr>\n";
  for (const std::string& name : rows(in.coverage)) {
    const BackendCoverage& b = in.coverage.by_backend.at(name);
    int64_t row_max = 0;
    for (size_t i = 0; i < columns.size(); ++i) row_max = std::max(row_max, value(b, i));
    os << "<tr><td class=name>" << html_escape(name) << " <small>(" << b.cases << ")</small></td>";
    for (size_t i = 0; i < columns.size(); ++i) cell(os, value(b, i), row_max);
    os << "</tr>\n";
  }
  os << "</table>\n";
}

int64_t lookup(const std::map<std::string, int64_t>& m, const std::string& k) {
  const auto it = m.find(k);
  return it == m.end() ? 0 : it->second;
}

}  // namespace

void coverage_heatmaps(std::ostream& os, const ReportInput& in) {
  os << "<h2>Coverage: cases checked</h2>\n<p class=legend>" << html_escape(in.coverage_line)
     << ". One row per backend (cases it checked, unsupported ones left out); the first row counts every case "
        "generated. "
        "Colour: a cell against its row's largest (log scale); pink: none checked. A case with several layer kinds "
        "counts "
        "under each.</p>\n";
  if (in.coverage.by_backend.empty()) {
    os << "<p class=note>campaign.json holds no coverage counts yet.</p>\n";
    return;
  }
  // Mode x layer kind: a column per (mode, kind), the modes as a header row above.
  std::vector<std::string> columns;
  std::vector<std::pair<std::string, std::string>> keys;
  std::string mode_head = "<tr><th class=name></th>";
  for (int m = 0; m < kModes; ++m) {
    const std::string mode = to_string(static_cast<Mode>(m));
    mode_head += "<th colspan=3>" + html_escape(mode) + "</th>";
    for (size_t k = 0; k < kLayerKinds.size(); ++k) {
      columns.push_back(kLayerShort[k]);
      keys.push_back({mode, kLayerKinds[k]});
    }
  }
  mode_head += "</tr>\n";
  os << "<h3>mode x layer kind <small>(F full, SW sliding window, C chunked)</small></h3>\n";
  table(
      os, in, "backend", columns,
      [&](const BackendCoverage& b, size_t i) {
        const auto it = b.mode_layer.find(keys[i].first);
        return it == b.mode_layer.end() ? int64_t{0} : lookup(it->second, keys[i].second);
      },
      mode_head);
  std::set<int32_t> sizes;
  for (const auto& [name, b] : in.coverage.by_backend)
    for (const auto& [ps, n] : b.page_sizes) sizes.insert(ps);
  std::vector<int32_t> size_list(sizes.begin(), sizes.end());
  std::vector<std::string> size_columns;
  for (int32_t ps : size_list) size_columns.push_back(std::to_string(ps));
  os << "<div class=two><div><h3>page size</h3>\n";
  table(os, in, "backend", size_columns, [&](const BackendCoverage& b, size_t i) {
    const auto it = b.page_sizes.find(size_list[i]);
    return it == b.page_sizes.end() ? int64_t{0} : it->second;
  });
  const std::vector<std::string>& features = case_feature_names();
  os << "</div><div><h3>feature</h3>\n";
  table(os, in, "backend", features,
        [&](const BackendCoverage& b, size_t i) { return lookup(b.features, features[i]); });
  os << "</div></div>\n";
}

}  // namespace kvfuzz
