#include "fuzz/explain.h"

#include <algorithm>
#include <optional>
#include <set>
#include <sstream>

#include "properties/check.h"
#include "properties/opaque_extent.h"

namespace kvfuzz {
namespace {

constexpr int kWrap = 96;  // columns per text line
constexpr int kCell = 9;   // SVG pixels per column

struct Query {
  int32_t layer;
  int64_t token;
  std::vector<int64_t> expected, read;
  std::vector<std::string> foreign;
  int32_t kv_cols;
};

char expected_mark(const Query& q, int32_t c) {
  return std::binary_search(q.expected.begin(), q.expected.end(), c) ? '#' : '.';
}

char read_mark(const Query& q, int32_t c) {
  const auto n = std::count(q.read.begin(), q.read.end(), c);
  return n == 0 ? '.' : n == 1 ? '#' : '2';
}

char diff_mark(const Query& q, int32_t c) {
  const bool e = expected_mark(q, c) == '#', r = read_mark(q, c) != '.';
  if (e && !r) return '-';
  if (!e && r) return '+';
  if (read_mark(q, c) == '2') return '2';
  return ' ';
}

void text_for(const Query& q, int32_t ps, std::ostringstream& os) {
  for (int32_t from = 0; from < q.kv_cols; from += kWrap) {
    const int32_t to = std::min(q.kv_cols, from + kWrap);
    std::string ruler, pages, expected, read, diff;
    for (int32_t c = from; c < to; ++c) {
      ruler += c % 10 == 0 ? static_cast<char>('0' + c / 10 % 10) : ' ';
      pages += c % ps == 0 ? '|' : ' ';
      expected += expected_mark(q, c);
      read += read_mark(q, c);
      diff += diff_mark(q, c);
    }
    os << "  column " << from << "..\n";
    os << "    tens     " << ruler << "\n    pages    " << pages << "\n    expected " << expected << "\n    read     "
       << read << "\n    diff     " << diff << "\n";
  }
  for (size_t i = 0; i < q.foreign.size() && i < 6; ++i) os << "    foreign  " << q.foreign[i] << "\n";
  if (q.foreign.size() > 6) os << "    ... and " << q.foreign.size() - 6 << " more foreign reads\n";
}

std::string svg_for(const std::vector<Query>& queries, const std::vector<std::string>& titles, int32_t ps) {
  int32_t width = 0;
  for (const Query& q : queries) width = std::max(width, q.kv_cols);
  const int row_h = 3 * kCell + 22;
  constexpr int kTop = 44;  // below the legend
  std::ostringstream os;
  os << "<svg xmlns='http://www.w3.org/2000/svg' width='" << 620 + width * kCell << "' height='"
     << kTop + static_cast<int>(queries.size()) * row_h << "' font-family='monospace' font-size='11'>\n";
  // The legend in two lines, so that it fits the picture's narrowest width.
  os << "<text x='4' y='14'>green: read and expected, red: expected but missing,</text>\n"
     << "<text x='4' y='28'>orange: read but not expected, purple: read twice; lines: page boundaries (page size " << ps
     << ")</text>\n";
  for (size_t i = 0; i < queries.size(); ++i) {
    const Query& q = queries[i];
    const int y0 = kTop + static_cast<int>(i) * row_h;
    os << "<text x='4' y='" << y0 + 10 << "'>" << titles[i] << "</text>\n";
    for (int line = 0; line < 2; ++line) {
      const int y = y0 + 14 + line * (kCell + 2);
      os << "<text x='4' y='" << y + kCell - 1 << "'>" << (line == 0 ? "expected" : "read") << "</text>\n";
      for (int32_t c = 0; c < q.kv_cols; ++c) {
        const char d = diff_mark(q, c);
        std::string fill = "#eeeeee";
        if (line == 0 && expected_mark(q, c) == '#') fill = d == '-' ? "#d62728" : "#2ca02c";
        if (line == 1 && read_mark(q, c) != '.') fill = d == '+' ? "#ff7f0e" : d == '2' ? "#9467bd" : "#2ca02c";
        os << "<rect x='" << 110 + c * kCell << "' y='" << y << "' width='" << kCell - 1 << "' height='" << kCell
           << "' fill='" << fill << "'/>\n";
      }
    }
    if (!q.foreign.empty())
      os << "<text x='" << 114 + q.kv_cols * kCell << "' y='" << y0 + 14 + 2 * kCell << "' fill='#d62728'>+ "
         << q.foreign.size() << " foreign reads (another request's or no live token's slots)</text>\n";
    for (int32_t c = 0; c <= q.kv_cols; c += ps)
      os << "<line x1='" << 109 + c * kCell << "' y1='" << y0 + 12 << "' x2='" << 109 + c * kCell << "' y2='"
         << y0 + 16 + 2 * (kCell + 2) << "' stroke='#333' stroke-width='1'/>\n";
  }
  os << "</svg>\n";
  return os.str();
}

}  // namespace

Explanation explain(const Scenario& s, const Backend& backend, const std::vector<std::string>& faults, int max_queries) {
  const CaseContext ctx(s);
  const BackendRun run = run_backend(ctx, backend, faults, /*lenient=*/true, /*read_probes=*/true);
  Explanation e;
  std::ostringstream os;
  if (!run.support.ok) {
    e.text = std::string(backend.name()) + ": unsupported: " + run.support.why + "\n";
    return e;
  }
  const CheckResult result = check_run(ctx, backend, run);
  e.findings = static_cast<int>(result.findings.size());
  if (result.findings.empty()) {
    e.text = std::string(backend.name()) + ": no finding on this case\n";
    return e;
  }
  for (const Finding& f : result.findings) os << f.backend << ": " << f.property << ": " << f.message << "\n";
  // What each query read: the read log, or for an opaque (external) executor the probe runs.
  std::optional<OpaqueReads> opaque;
  if (run.ran && !backend.records_reads()) opaque = recover_reads(ctx, backend, run);
  std::vector<Query> queries;
  std::vector<std::string> titles;
  std::set<std::pair<int32_t, int64_t>> seen;
  const ForwardBatch& fb = ctx.batch();
  for (const Finding& f : result.findings) {
    if (!run.ran || f.layer < 0 || f.token < 0 || f.row < 0 || f.row >= fb.bs) continue;
    if (!seen.insert({f.layer, f.token}).second || static_cast<int>(queries.size()) >= max_queries) continue;
    if (opaque && opaque->reads.empty()) continue;
    const ResolvedReads r = opaque ? opaque->at(f.layer, f.token) : resolve_reads(ctx, run, f.layer, f.token);
    const LogicalRow& row = ctx.logical().rows[static_cast<size_t>(f.row)];
    queries.push_back({f.layer, f.token, expected_columns(ctx, f.layer, f.token), r.columns, r.foreign, row.kv_cols});
    std::ostringstream title;
    title << "layer " << f.layer << " (" << to_string(s.model.layers[static_cast<size_t>(f.layer)].kind) << "), request "
          << fb.request_ids[static_cast<size_t>(f.row)] << ", query position " << fb.positions[static_cast<size_t>(f.token)];
    titles.push_back(title.str());
  }
  for (size_t i = 0; i < queries.size(); ++i) {
    os << "\n" << titles[i] << " — '#' expected / read, '-' missing, '+' extra, '2' read twice, '|' page boundary:\n";
    text_for(queries[i], s.cache.page_size, os);
  }
  e.text = os.str();
  if (!queries.empty()) e.svg = svg_for(queries, titles, s.cache.page_size);
  return e;
}

}  // namespace kvfuzz
