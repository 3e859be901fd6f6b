#include "fuzz/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "fuzz/report_heatmap.h"

namespace kvfuzz {
namespace {

std::string base64(const std::string& in) {
  static const char* kDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  for (size_t i = 0; i < in.size(); i += 3) {
    const uint32_t b0 = static_cast<unsigned char>(in[i]);
    const uint32_t b1 = i + 1 < in.size() ? static_cast<unsigned char>(in[i + 1]) : 0;
    const uint32_t b2 = i + 2 < in.size() ? static_cast<unsigned char>(in[i + 2]) : 0;
    const uint32_t w = b0 << 16 | b1 << 8 | b2;
    out += kDigits[w >> 18 & 63];
    out += kDigits[w >> 12 & 63];
    out += i + 1 < in.size() ? kDigits[w >> 6 & 63] : '=';
    out += i + 2 < in.size() ? kDigits[w & 63] : '=';
  }
  return out;
}

// explain's pictures are drawn small (one key a few pixels wide): shown at 1.5x their width.
std::string display_width(const std::string& svg) {
  const size_t at = svg.find("width='");
  if (at == std::string::npos) return "";
  const int width = std::atoi(svg.c_str() + at + 7);
  return width > 0 ? " width=" + std::to_string(width * 3 / 2) : "";
}

const char* kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:18px 28px}
header h1{margin:0 0 4px;font-size:20px}
header p{margin:0;color:#c5cad6}
main{padding:8px 28px 40px;max-width:1400px}
h2{font-size:17px;margin:28px 0 10px;border-bottom:1px solid #d8dce3;padding-bottom:4px}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin-top:16px}
.card{background:#fff;border:1px solid #d8dce3;border-radius:6px;padding:10px 16px;min-width:110px}
.card b{display:block;font-size:22px}
.card span{color:#5b6375;font-size:12px}
.label{display:inline-block;border-radius:4px;padding:1px 8px;font-size:12px;font-weight:600;color:#fff;vertical-align:1px}
.label.NEW{background:#c62828}.label.regression{background:#8e24aa}.label.known{background:#2e7d32}.label.untriaged{background:#6b7280}
section.group{background:#fff;border:1px solid #d8dce3;border-left:5px solid #6b7280;border-radius:6px;padding:12px 16px;margin:12px 0}
section.group[data-label=NEW]{border-left-color:#c62828}section.group[data-label=regression]{border-left-color:#8e24aa}
section.group[data-label=known]{border-left-color:#2e7d32}
section.group h3{margin:0 0 6px;font-size:15px}
section.group h3 code{font-size:14px}
.meta{color:#5b6375;margin:2px 0 8px}
.msg{margin:6px 0;white-space:pre-wrap;font-family:ui-monospace,Menlo,monospace;font-size:12.5px;background:#f3f4f6;padding:6px 8px;border-radius:4px}
figure{margin:8px 0;overflow-x:auto}
figure img{max-width:100%;height:auto;border:1px solid #e3e6eb;background:#fff}
figure.broken::after{content:"picture failed to load";color:#c62828}
.note{color:#5b6375;font-style:italic}
.replay{display:flex;gap:8px;align-items:flex-start}
.replay pre{flex:1;margin:0;background:#1d2330;color:#e7eaf0;padding:8px 10px;border-radius:4px;white-space:pre-wrap;word-break:break-all;font-size:12.5px}
button{font:inherit;font-size:12px;padding:4px 10px;border:1px solid #b8beca;border-radius:4px;background:#fff;cursor:pointer}
details{margin-top:6px}details pre{max-height:360px;overflow:auto;background:#f3f4f6;padding:8px;font-size:12px}
table{border-collapse:collapse;background:#fff;font-size:12.5px}
table.groups{margin-bottom:10px;width:100%}table.groups tr.root td{background:#eef1f6;font-weight:600}table.groups td.key{text-align:left;word-break:break-word}table.groups a{color:#1d2330;text-decoration:none}
th,td{border:1px solid #e1e4ea;padding:3px 7px;text-align:right}
th{background:#eef0f4;font-weight:600}
td.name,th.name{text-align:left;white-space:nowrap}
table.heat td{min-width:30px;text-align:center}
table.heat td.name{text-align:left}
table.heat td.zero{background:#fdf0f0;color:#c9a3a3}
.legend{color:#5b6375;font-size:12px;margin:4px 0 14px}
.two{display:flex;gap:28px;flex-wrap:wrap;align-items:flex-start}
)";

const char* kScript = R"(
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var broken = imgs.filter(function (i) { return !i.complete || i.naturalWidth === 0; });
  broken.forEach(function (i) { i.parentNode.classList.add('broken'); });
  document.body.setAttribute('data-groups', document.querySelectorAll('section.group').length);
  document.body.setAttribute('data-images', imgs.length);
  document.body.setAttribute('data-images-broken', broken.length);
  document.body.setAttribute('data-rendered', 'yes');
});
function copyReplay(button) {
  var text = button.previousElementSibling.textContent;
  if (navigator.clipboard) navigator.clipboard.writeText(text);
  button.textContent = 'copied';
}
)";

void card(std::ostream& os, const std::string& value, const std::string& what) {
  os << "<div class=card><b>" << html_escape(value) << "</b><span>" << html_escape(what) << "</span></div>";
}

std::string rate(const ReportInput& in, const std::string& name) {
  for (const auto& [k, v] : in.rates)
    if (k == name) return v;
  return "?";
}

void header(std::ostream& os, const ReportInput& in) {
  std::map<std::string, int> labels;
  for (const FindingGroup& g : in.groups) labels[g.label]++;
  os << "<header><h1>kvfuzz campaign report</h1><p>" << html_escape(in.dir) << " &middot; "
     << (in.finished ? "finished" : "still running or stopped early (record written on the way)")
     << " &middot; written " << html_escape(in.written) << " on " << html_escape(in.host)
     << "</p></header><main>\n<div class=cards>";
  card(os, rate(in, "cases"), "cases");
  card(os, rate(in, "seconds"), "seconds");
  card(os, rate(in, "cases_per_second"), "cases / s");
  card(os, rate(in, "findings"), "findings");
  std::set<std::string> roots;
  for (const FindingGroup& g : in.groups) roots.insert(g.root);
  card(os, std::to_string(roots.size()), "root-cause groups");
  card(os, std::to_string(in.groups.size()), "fingerprint keys");
  for (const char* l : {"NEW", "regression", "untriaged", "known"})
    if (labels.count(l)) card(os, std::to_string(labels[l]), std::string(l) + " groups");
  os << "</div>\n";
}

void group_section(std::ostream& os, const FindingGroup& g, size_t index) {
  os << "<section class=group id=g" << index << " data-key=\"" << html_escape(g.key) << "\" data-label=\""
     << html_escape(g.label) << "\">\n<h3><span class=\"label " << html_escape(g.label) << "\">" << html_escape(g.label)
     << "</span> <code>" << html_escape(g.key) << "</code></h3>\n<p class=meta>root-cause group <code>"
     << html_escape(g.root) << "</code> &middot; " << g.count << " finding" << (g.count == 1 ? "" : "s") << " in "
     << g.cases << " case" << (g.cases == 1 ? "" : "s") << " &middot; first case " << g.first_case;
  if (!g.issue.empty()) os << " &middot; known issue <b>" << html_escape(g.issue) << "</b>";
  os << " &middot; " << html_escape(g.property) << " / " << html_escape(g.backend) << " / " << html_escape(g.mode)
     << " / " << html_escape(g.layer.empty() ? "no layer" : g.layer) << " / " << html_escape(g.mechanism) << "</p>\n";
  if (!g.message.empty()) os << "<div class=msg>" << html_escape(g.message) << "</div>\n";
  if (!g.picture_svg.empty())
    os << "<figure><img alt=\"expected and read keys of each failing query\"" << display_width(g.picture_svg)
       << " src=\"data:image/svg+xml;base64," << base64(g.picture_svg) << "\"></figure>\n";
  else os << "<p class=note>" << html_escape(g.picture_note) << "</p>\n";
  os << "<div class=replay><pre>" << html_escape(g.replay)
     << "</pre><button onclick=\"copyReplay(this)\">copy</button></div>\n";
  if (!g.case_file.empty()) {
    os << "<details><summary>" << (g.shrunk ? "shrunk case " : "case (not shrunk) ") << "<code>"
       << html_escape(g.case_file) << "</code></summary><pre>" << html_escape(g.case_text) << "</pre></details>\n";
    if (!g.report_text.empty())
      os << "<details><summary>its report</summary><pre>" << html_escape(g.report_text) << "</pre></details>\n";
  }
  os << "</section>\n";
}

void findings(std::ostream& os, const ReportInput& in) {
  os << "<h2>Findings by root cause</h2>\n";
  if (in.groups.empty()) {
    os << "<p>No findings: every case the backends checked held every property.</p>\n";
    return;
  }
  os << "<p class=legend>"
     << (in.triage_file.empty() ? "Not triaged: run <code>python3 adapters/triage.py " + html_escape(in.dir) +
                                      " --issues FILE</code> to label the groups known, NEW or regression."
                                : "Labels from <code>" + html_escape(in.triage_file) + "</code>.")
     << " Findings are grouped by root cause (the earliest stage that failed on their case: metadata, table, "
        "reads, values; docs/triage.md), and inside a group by fingerprint key (property, backend, mode, layer kind, "
        "mechanism); pasting a key's replay line exits 1.</p>\n";
  os << "<table class=groups><tr><th class=name>label</th><th class=name>fingerprint "
        "key</th><th>findings</th><th>cases</th>"
        "<th class=name>known issue</th></tr>\n";
  for (size_t i = 0; i < in.groups.size(); ++i) {
    const FindingGroup& g = in.groups[i];
    if (i == 0 || in.groups[i - 1].root != g.root)
      os << "<tr class=root><td class=key colspan=5>root-cause group <code>" << html_escape(g.root)
         << "</code></td></tr>\n";
    os << "<tr><td class=name><span class=\"label " << html_escape(g.label) << "\">" << html_escape(g.label)
       << "</span></td><td class=key><a href=\"#g" << i << "\"><code>" << html_escape(g.key) << "</code></a></td><td>"
       << g.count << "</td><td>" << g.cases << "</td><td class=name>" << html_escape(g.issue) << "</td></tr>\n";
  }
  os << "</table>\n";
  for (size_t i = 0; i < in.groups.size(); ++i) group_section(os, in.groups[i], i);
}

void settings(std::ostream& os, const ReportInput& in) {
  os << "<h2>Campaign</h2>\n<div class=two><table><tr><th class=name colspan=2>settings</th></tr>\n";
  for (const auto& [k, v] : in.settings)
    os << "<tr><td class=name>" << html_escape(k) << "</td><td class=name>" << html_escape(v) << "</td></tr>\n";
  os << "</table>\n<table><tr><th class=name>backend</th><th>offered</th><th>checked</th><th>unsupported</th></tr>\n";
  for (const auto& b : in.backends)
    os << "<tr><td class=name>" << html_escape(b.name) << "</td><td>" << b.offered << "</td><td>" << b.checked
       << "</td><td>" << b.unsupported << "</td></tr>\n";
  os << "</table>\n";
  if (!in.variants.empty()) {
    os << "<table><tr><th class=name>metamorphic variant</th><th>run</th><th>invalid</th><th>unsupported</th></tr>\n";
    for (const auto& [name, n] : in.variants)
      os << "<tr><td class=name>" << html_escape(name) << "</td><td>" << n[0] << "</td><td>" << n[1] << "</td><td>"
         << n[2] << "</td></tr>\n";
    os << "</table>\n";
  }
  os << "</div>\n";
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string render_report_html(const ReportInput& in) {
  std::ostringstream os;
  os << "<!doctype html>\n<html lang=en><head><meta charset=utf-8><title>kvfuzz report: " << html_escape(in.dir)
     << "</title>\n<style>" << kStyle << "</style></head>\n<body>\n";
  header(os, in);
  findings(os, in);
  coverage_heatmaps(os, in);
  settings(os, in);
  os << "<p class=legend>Written by <code>kvfuzz report</code> from " << html_escape(in.dir)
     << "/campaign.json, index.jsonl and triage.json (docs/triage.md).</p>\n</main>\n<script>" << kScript
     << "</script>\n</body></html>\n";
  return os.str();
}

}  // namespace kvfuzz
