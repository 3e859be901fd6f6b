// Upstream issue drafts from a known issue, its notes and its reproducer's runs (repro_report.h).
#include "fuzz/repro_report.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "fuzz/repro.h"
#include "reference/case_error.h"
#include "reference/io.h"

namespace kvfuzz {
namespace {

// The releases kvfuzz has run per package: sglang's release matrix (corpus/sglang/README.md,
// ci/sglang.sh RELEASES) and the pinned GPU packages (ci/gpu.sh, ci/gpu_wheels.py).
const std::map<std::string, std::vector<std::string>>& run_releases() {
  static const std::map<std::string, std::vector<std::string>> r{
      {"sglang", {"0.5.10.post1", "0.5.11", "0.5.12.post1", "0.5.13", "0.5.23"}},
      {"flashinfer", {"0.7.2.post1"}},
      {"triton", {"3.6.0"}},
      {"torch", {"2.11.0"}}};
  return r;
}

// "0.5.10.post1" -> {0, 5, 10, 2}: numbers, a postN release one past its base (N + 1).
std::vector<int64_t> version_key(const std::string& v) {
  std::vector<int64_t> key;
  std::stringstream in(v);
  for (std::string part; std::getline(in, part, '.');) {
    if (part.rfind("post", 0) == 0) key.push_back(1 + std::stoll("0" + part.substr(4)));
    else key.push_back(std::stoll("0" + part));
  }
  while (key.size() < 4) key.push_back(0);
  return key;
}

// The paths ending in ".json" that a minimal_case (a string, or {"case": ...}) names.
std::vector<std::string> minimal_cases(const nlohmann::json& mc) {
  std::vector<std::string> out;
  if (mc.is_object()) {
    if (mc.contains("case") && mc["case"].is_string()) out.push_back(mc["case"].get<std::string>());
    return out;
  }
  if (!mc.is_string()) return out;
  std::stringstream in(mc.get<std::string>());
  for (std::string word; in >> word;) {
    while (!word.empty() && (word.back() == ',' || word.back() == ')' || word.back() == ';')) word.pop_back();
    if (word.size() > 5 && word.compare(word.size() - 5, 5, ".json") == 0) out.push_back(word);
  }
  return out;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A run's output as a person reads it: without the reproducer's `RESULT {json}` line (for machines,
// ci/gpu_pair_table.py).
std::string for_people(const std::string& output) {
  std::stringstream in(output);
  std::string kept;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("RESULT {", 0) != 0) kept += line + "\n";
  return kept;
}

std::string text(const nlohmann::json& j, const char* key, const std::string& otherwise = "") {
  return j.contains(key) && j[key].is_string() && !j[key].get<std::string>().empty() ? j[key].get<std::string>()
                                                                                     : otherwise;
}

// "sliding window W = 2 (3 keys)", "chunked, chunk 4", "full".
std::string layer_text(const nlohmann::json& l) {
  const std::string kind = l.value("kind", "full");
  if (kind == "sliding_window")
    return "sliding window, radius W = " + std::to_string(l.value("window", 0)) + " (each query sees " +
           std::to_string(l.value("window", 0) + 1) + " keys: positions P - W .. P)";
  if (kind == "chunked") return "chunked local attention, chunk " + std::to_string(l.value("chunk", 0));
  return "full causal";
}

// The batch in words: mode, layers, rows with their cached prefix and new tokens' positions.
std::string batch_text(const nlohmann::json& b) {
  std::ostringstream o;
  const nlohmann::json& m = b["model"];
  o << "- mode `" << b.value("mode", "") << "`, " << b.value("dtype", "") << ", page size " << b.value("page_size", 1)
    << ", " << m.value("q_heads", 1) << " query heads / " << m.value("kv_heads", 1) << " KV heads, head dims "
    << m.value("head_dim", 0) << " (Q/K) / " << m.value("v_head_dim", 0) << " (V)";
  if (b.value("topk", 1) > 1) o << ", topk " << b.value("topk", 1);
  o << "\n";
  for (size_t i = 0; i < m["layers"].size(); ++i) o << "- layer " << i << ": " << layer_text(m["layers"][i]) << "\n";
  for (const nlohmann::json& row : b["rows"]) {
    o << "- request " << row.value("request", 0) << ": " << row.value("prefix_len", 0)
      << " cached tokens, queries at positions";
    for (const nlohmann::json& q : row["queries"]) o << " " << q.value("position", 0);
    o << "\n";
  }
  return o.str();
}

}  // namespace

nlohmann::json find_known_issue(const std::vector<std::string>& issue_files, const std::string& id,
                                const std::string& case_path) {
  std::string searched;
  for (const std::string& file : issue_files) {
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(read_input(file, kMaxCaseBytes));
    } catch (const nlohmann::json::exception& e) {
      throw InvalidCase(file + ": not a known-issue file: " + e.what());
    }
    if (!doc.contains("issues") || !doc["issues"].is_array()) throw InvalidCase(file + ": no \"issues\" list");
    for (const nlohmann::json& issue : doc["issues"]) {
      if (!id.empty()) {
        if (issue.value("id", "") == id) return issue;
        continue;
      }
      for (const std::string& mc : minimal_cases(issue.value("minimal_case", nlohmann::json())))
        if (ends_with(case_path, mc) || ends_with(mc, case_path)) return issue;
    }
    searched += (searched.empty() ? "" : ", ") + file;
  }
  throw InvalidCase((id.empty() ? "no known issue has the minimal case " + case_path : "no known issue " + id) +
                    " (searched " + searched + "; --issue ID names one)");
}

std::vector<std::string> affected_releases(const nlohmann::json& affected) {
  const auto it = run_releases().find(affected.value("package", ""));
  if (it == run_releases().end()) return {};
  const std::string first = text(affected, "first");
  const std::string fixed =
      affected.contains("fixed") && affected["fixed"].is_string() ? affected["fixed"].get<std::string>() : "";
  std::vector<std::string> out;
  for (const std::string& r : it->second)
    if ((first.empty() || version_key(r) >= version_key(first)) &&
        (fixed.empty() || version_key(r) < version_key(fixed)))
      out.push_back(r);
  return out;
}

std::string issue_report(const nlohmann::json& issue, const nlohmann::json& notes, const nlohmann::json& bundle,
                         const std::vector<ReproOutput>& outputs) {
  std::ostringstream o;
  const nlohmann::json affected = issue.value("affected", nlohmann::json::object());
  const std::string package = affected.value("package", "");
  o << "# " << text(notes, "title", text(issue, "title")) << "\n\n";
  o << "<!-- draft written by `kvfuzz repro " << text(bundle["finding"], "case") << " --report` (kvfuzz known issue `"
    << issue.value("id", "") << "`); review before filing -->\n\n";
  o << "**Affected**: " << package << " " << text(affected, "first", "?") << " up to "
    << (affected.contains("fixed") && affected["fixed"].is_string() ? "before " + affected["fixed"].get<std::string>()
                                                                    : "the latest release checked (no fix known)");
  const std::vector<std::string> releases = affected_releases(affected);
  if (issue.contains("bisect") && issue["bisect"].is_string()) {  // the range as kvfuzz bisect computed it
    o << "; bisected over the releases on the package index: `" << issue["bisect"].get<std::string>() << "`";
  } else if (!releases.empty()) {
    o << "; of the releases checked (";
    const auto& all = run_releases().at(package);
    for (size_t i = 0; i < all.size(); ++i) o << (i ? ", " : "") << all[i];
    o << "), affected:";
    for (const std::string& r : releases) o << " " << r;
  }
  o << ".\n\n";
  o << "**Who reaches it**: " << text(notes, "reach", text(issue, "reach", "not known")) << ".\n\n";
  o << "**Effect**: " << text(notes, "effect", text(issue, "effect", "not stated")) << ".\n\n";
  o << "## What happens\n\n" << text(notes, "what", text(issue, "verdict")) << "\n\n";
  o << "## Reproducer\n\n";
  const std::string repro = text(notes, "repro");
  if (!repro.empty())
    o << "`" << repro << "` ("
      << text(notes, "needs", "standalone: numpy, torch and the " + package + " package; no kvfuzz")
      << "). It builds the batch below, computes the expected output in float64 from the "
         "tokens' logical positions, prints the keys each query should read and did read, and exits 1 when the bug is "
         "there, 0 when it is not. It imports kvfuzz's harness, `"
      << repro_harness_name(bundle) << ".py`, from beside it; `kvfuzz repro " << text(bundle["finding"], "case")
      << " --backend " << bundle.value("backend", "") << " -o " << repro << "` writes both.\n\n";
  else
    o << "No standalone script yet: the keys below come from the release's own metadata code (its backend class on a "
         "stand-in model runner, kvfuzz's adapters/sglang, on a CPU) run by kvfuzz's checked executor; the replay line "
         "at the end reproduces them.\n\n";
  if (!text(notes, "run").empty()) o << "```\n" << text(notes, "run") << "\n```\n\n";
  o << "The batch:\n\n" << batch_text(bundle) << "\n";
  o << "## Expected vs actual\n\n";
  if (outputs.empty()) o << "(the reproducer was not run for this draft)\n\n";
  for (const ReproOutput& out : outputs) o << out.label << ":\n\n```\n" << for_people(out.text) << "```\n\n";
  o << "## Where\n\n" << text(notes, "location", "(not located)") << "\n\n";
  o << "## Suggested fix\n\n" << text(notes, "fix", "(none proposed)") << "\n\n";
  if (!text(notes, "search").empty() || !text(issue, "upstream").empty())
    o << "## Upstream\n\n"
      << text(notes, "search", "") << (text(issue, "upstream").empty() ? "" : " See also: " + text(issue, "upstream"))
      << "\n\n";
  o << "Found by kvfuzz (a fuzzer for the attention metadata of LLM serving engines); kvfuzz replay: `"
    << text(bundle["finding"], "replay",
            "kvfuzz check " + text(bundle["finding"], "case") + " --backend " + bundle.value("backend", ""))
    << "`\n";
  return o.str();
}

}  // namespace kvfuzz
