#include "fuzz/report_input.h"

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "reference/case_error.h"
#include "reference/io.h"

namespace kvfuzz {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

constexpr size_t kMaxRecordBytes = size_t{256} << 20;

json parse_file(const std::string& path) {
  const std::string text = read_input(path, kMaxRecordBytes);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw InvalidCase(path + ": not JSON (" + e.what() + ")");
  }
}

std::string text_of(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    std::ostringstream os;
    os << std::fixed << std::setprecision(v.get<double>() < 100 ? 2 : 1) << v.get<double>();
    return os.str();
  }
  if (v.is_array()) {
    std::string out;
    for (const json& e : v) out += (out.empty() ? "" : " ") + text_of(e);
    return out.empty() ? "(none)" : out;
  }
  return v.dump();
}

std::string string_field(const json& o, const char* name) {
  const auto it = o.find(name);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The last "replay: ..." line of a report.
std::string replay_of(const std::string& report) {
  const size_t at = report.rfind("replay: ");
  if (at == std::string::npos) return "";
  const size_t end = report.find('\n', at);
  return report.substr(at + 8, end == std::string::npos ? std::string::npos : end - at - 8);
}

// A saved path as the index gives it (relative to where the campaign ran), else inside `dir`.
std::string locate(const std::string& dir, const std::string& saved) {
  if (fs::exists(saved)) return saved;
  const std::string inside = dir + "/" + fs::path(saved).filename().string();
  if (fs::exists(inside)) return inside;
  throw InvalidCase(dir + "/index.jsonl: saved finding " + saved + " not found (nor as " + inside + ")");
}

void read_campaign(const std::string& dir, ReportInput& in) {
  const std::string path = dir + "/campaign.json";
  if (!fs::exists(path))
    throw InvalidCase(path + " not found: not a campaign's folder (kvfuzz run --out " + dir + " writes it)");
  const json r = parse_file(path);
  if (!r.is_object() || string_field(r, "format") != "kvfuzz-campaign" || !r.contains("settings"))
    throw InvalidCase(path + ": not a kvfuzz campaign record (no \"format\": \"kvfuzz-campaign\" with settings)");
  try {
    in.finished = r.value("finished", false);
    in.written = string_field(r, "written");
    if (r.contains("host"))
      in.host = r["host"].value("name", "") + ", " + std::to_string(r["host"].value("cores", 0)) + " cores";
    for (const auto& [k, v] : r["settings"].items()) {
      const bool no_limit = (k == "seconds" || k == "cases") && v.is_number() && v.get<double>() == 0;
      in.settings.push_back({k, no_limit ? "no limit" : text_of(v)});
    }
    if (r["settings"].contains("faults")) in.faults = r["settings"]["faults"].get<std::vector<std::string>>();
    const json rates = r.value("rates", json::object()), backends = r.value("backends", json::object()),
               variants = r.value("variants", json::object());  // named: items() must not outlive them
    for (const auto& [k, v] : rates.items()) in.rates.push_back({k, text_of(v)});
    for (const auto& [k, v] : backends.items())
      in.backends.push_back(
          {k, v.value("offered", int64_t{0}), v.value("checked", int64_t{0}), v.value("unsupported", int64_t{0})});
    for (const auto& [k, v] : variants.items())
      in.variants.push_back(
          {k, {v.value("run", int64_t{0}), v.value("invalid", int64_t{0}), v.value("unsupported", int64_t{0})}});
    const json coverage = r.value("coverage", json::object());
    const json by_backend = coverage.value("by_backend", json::object());
    in.coverage_line = coverage.value("line", "");
    for (const auto& [name, c] : by_backend.items()) in.coverage.by_backend[name] = backend_coverage_from_json(c);
  } catch (const std::exception& e) {  // json type errors, std::stoi
    throw InvalidCase(path + ": malformed campaign record (" + e.what() + ")");
  }
}

void read_index(const std::string& dir, ReportInput& in, int64_t findings) {
  const std::string path = dir + "/index.jsonl";
  if (!fs::exists(path)) {
    if (findings == 0) return;
    throw InvalidCase(path + " not found, though campaign.json counts " + std::to_string(findings) + " findings");
  }
  std::istringstream lines(read_input(path, kMaxRecordBytes));
  std::map<std::string, size_t> by_key;
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + " line " + std::to_string(n);
    json e;
    try {
      e = json::parse(line);
    } catch (const json::exception& x) {
      throw InvalidCase(where + ": not JSON (" + x.what() + ")");
    }
    if (!e.is_object() || string_field(e, "key").empty()) throw InvalidCase(where + ": no \"key\"");
    const json fp = e.value("fingerprint", json::object());
    if (!fp.is_object()) throw InvalidCase(where + ": \"fingerprint\" is not an object");
    auto [it, fresh] = by_key.emplace(e["key"].get<std::string>(), in.groups.size());
    if (fresh) {
      FindingGroup g;
      g.key = it->first;
      g.root = string_field(e, "group").empty() ? g.key : string_field(e, "group");
      g.label = "untriaged";
      g.property = string_field(fp, "property");
      g.backend = string_field(fp, "backend");
      g.executor = string_field(fp, "executor");
      g.mode = string_field(fp, "mode");
      g.layer = fp.contains("layer") && fp["layer"].is_object() ? string_field(fp["layer"], "kind") : "";
      g.mechanism = string_field(fp, "mechanism");
      g.message = string_field(e, "message");
      g.replay = string_field(e, "replay");
      in.groups.push_back(std::move(g));
    }
    FindingGroup& g = in.groups[it->second];
    const int64_t index = e.value("case_index", int64_t{-1});
    g.count += e.value("count", int64_t{1});
    g.cases += 1;
    if (g.first_case < 0 || (index >= 0 && index < g.first_case)) g.first_case = index;
    const std::string saved = e.contains("saved") && e["saved"].is_string() ? e["saved"].get<std::string>() : "";
    if (!saved.empty() && (g.case_file.empty() || !g.shrunk)) {
      const std::string file = locate(dir, saved);
      // The index names the shrunk case once there is one (<base>.min.json), else <base>.json.
      const size_t suffix = file.ends_with(".min.json") ? 9 : file.ends_with(".json") ? 5 : 0;
      const std::string base = file.substr(0, file.size() - suffix);
      const bool shrunk = suffix == 9 || fs::exists(base + ".min.json");
      if (g.case_file.empty() || shrunk) {
        g.shrunk = shrunk;
        g.case_file = shrunk ? base + ".min.json" : file;
        g.case_text = read_input(g.case_file, kMaxCaseBytes);
        const std::string txt = base + (shrunk ? ".min.txt" : ".txt");
        g.report_text = fs::exists(txt) ? read_input(txt, kMaxCaseBytes) : "";
        const std::string r = replay_of(g.report_text);
        if (!r.empty()) g.replay = r;
      }
    }
  }
}

void read_triage(const std::string& dir, ReportInput& in) {
  const std::string path = dir + "/triage.json";
  if (!fs::exists(path)) return;
  const json t = parse_file(path);
  if (!t.is_object() || !t.contains("groups") || !t["groups"].is_array())
    throw InvalidCase(path + ": no \"groups\" array (adapters/triage.py writes it)");
  in.triage_file = path;
  std::map<std::string, const json*> verdicts;
  for (const json& g : t["groups"]) {
    if (!g.is_object() || string_field(g, "key").empty()) throw InvalidCase(path + ": a group without \"key\"");
    const std::string label = string_field(g, "label");
    if (label != "known" && label != "NEW" && label != "regression")
      throw InvalidCase(path + ": group " + g["key"].get<std::string>() + " has label '" + label +
                        "' (known, NEW or regression)");
    verdicts[g["key"].get<std::string>()] = &g;
  }
  for (FindingGroup& g : in.groups) {
    const auto it = verdicts.find(g.key);
    if (it == verdicts.end()) continue;  // indexed after triage ran: stays untriaged
    g.label = string_field(*it->second, "label");
    g.issue = string_field(*it->second, "issue");
  }
}

int label_rank(const std::string& label) {
  if (label == "NEW") return 0;
  if (label == "regression") return 1;
  if (label == "untriaged") return 2;
  return 3;
}

}  // namespace

ReportInput load_report_input(const std::string& dir) {
  if (!fs::is_directory(dir)) throw InvalidCase(dir + ": no such folder");
  ReportInput in;
  in.dir = dir;
  read_campaign(dir, in);
  int64_t findings = 0;
  for (const auto& [k, v] : in.rates)
    if (k == "findings") findings = std::stoll(v);
  read_index(dir, in, findings);
  read_triage(dir, in);
  // Each root-cause group ranks by its worst key's label and its findings.
  std::map<std::string, std::pair<int, int64_t>> roots;
  for (const FindingGroup& g : in.groups) {
    auto [it, fresh] = roots.emplace(g.root, std::pair<int, int64_t>{label_rank(g.label), 0});
    it->second.first = std::min(it->second.first, label_rank(g.label));
    it->second.second += g.count;
  }
  std::stable_sort(in.groups.begin(), in.groups.end(), [&](const FindingGroup& a, const FindingGroup& b) {
    const auto& ra = roots.at(a.root);
    const auto& rb = roots.at(b.root);
    if (ra.first != rb.first) return ra.first < rb.first;
    if (ra.second != rb.second) return ra.second > rb.second;
    if (a.root != b.root) return a.root < b.root;
    if (label_rank(a.label) != label_rank(b.label)) return label_rank(a.label) < label_rank(b.label);
    return a.count > b.count;
  });
  return in;
}

}  // namespace kvfuzz
