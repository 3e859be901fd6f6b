#include "fuzz/campaign_merge.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "fuzz/campaign.h"
#include "fuzz/campaign_record.h"
#include "fuzz/case_draw.h"
#include "fuzz/coverage.h"
#include "fuzz/coverage_counts.h"
#include "fuzz/finding_index.h"
#include "fuzz/replay.h"
#include "reference/case_error.h"
#include "reference/generate.h"
#include "reference/io.h"

namespace kvfuzz {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

// The settings that name the cases of a campaign: shards that differ in one ran another campaign.
const char* const kCampaignSettings[] = {
    "seed", "cases", "profiles", "backends", "faults", "metamorphic_every", "reuse_shapes", "shape_run", "shape_seed",
    "shard_block"};

struct Shard {
  std::string dir;
  json record;
  int index = 0, count = 1;
  int64_t block = 1;  // settings "shard_block" (fuzz/shard.h); shards written before it: 1
  std::vector<json> lines;
  ShardRule rule() const { return {index, count, block}; }
};

struct Candidate {  // a saved case of one index line
  size_t line = 0;
  std::string file, saved;  // where it is now, and as the line names it
  bool shrunk = false;
  uintmax_t bytes = 0;
  int64_t case_index = 0;
};

std::string base_of(const std::string& file) {  // without .min.json / .json
  const size_t suffix = file.ends_with(".min.json") ? 9 : file.ends_with(".json") ? 5 : 0;
  return file.substr(0, file.size() - suffix);
}

// Renames case file `from` (as the index's `saved` names it: relative to where its shard ran) to
// `to` in text holding replay lines. A replay line names its case by the absolute path (replay.h),
// which ends in `from`: the whole shell word that ends in `from` becomes `to` (by its absolute path
// unless `as_given`).
// rename_case(line, "shard-0/a.json", "merged/a.json"): "... check /w/shard-0/a.json --backend fa"
// -> "... check /w/merged/a.json --backend fa".
void rename_case(std::string& text, const std::string& from, const std::string& to, bool as_given = false) {
  const std::string into = shell_quote(as_given ? to : fs::absolute(to).lexically_normal().string());
  const auto word_char = [&](size_t i) { return text[i] != ' ' && text[i] != '\n' && text[i] != '('; };
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
    size_t begin = at, end = at + from.size();
    if (end < text.size() && text[end] == '\'') ++end;  // a quoted word's closing quote
    if (end < text.size() && word_char(end)) {          // `from` is only the start of a longer word
      at = end;
      continue;
    }
    while (begin > 0 && word_char(begin - 1)) --begin;
    text.replace(begin, end - begin, into);
    at = begin + into.size();
  }
}

json parse_json(const std::string& text, const std::string& where) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw InvalidCase(where + ": not JSON (" + e.what() + ")");
  }
}

Shard read_shard(const std::string& dir) {
  if (!fs::is_directory(dir))
    throw InvalidCase(dir + ": not a folder (kvfuzz merge OUT DIR... takes the shards' --out folders)");
  const std::string path = dir + "/campaign.json";
  if (!fs::exists(path))
    throw InvalidCase(path + " not found: not a campaign's folder (kvfuzz run --out " + dir + " writes it)");
  Shard s{dir, parse_json(read_input(path, kMaxCaseBytes), path), 0, 1, 1, {}};
  const json& r = s.record;
  if (!r.is_object() || r.value("format", "") != "kvfuzz-campaign" || !r.contains("settings") || !r.contains("rates"))
    throw InvalidCase(path + ": not a kvfuzz campaign record");
  if (!r.value("finished", false))
    throw InvalidCase(dir +
                      ": its campaign did not finish (campaign.json says \"finished\": false): still running, or "
                      "killed without a SIGTERM first; run that shard again");
  if (!r.contains("coverage") || !r["coverage"].is_object() || !r["coverage"].contains("touched"))
    throw InvalidCase(path + ": no coverage \"touched\" (written by an older kvfuzz): run the shard again");
  const auto part = parse_shard(r["settings"].value("shard", "0/1"));
  if (!part) throw InvalidCase(path + ": settings \"shard\" is not I/N");
  s.index = part->first;
  s.count = part->second;
  const json& block = r["settings"].contains("shard_block") ? r["settings"]["shard_block"] : json(1);
  if (!block.is_number_integer() || block.get<int64_t>() < 1)
    throw InvalidCase(path + ": settings \"shard_block\" is not a whole number of at least 1");
  s.block = block.get<int64_t>();
  return s;
}

// The shard's index lines, checked whole: each line ends in a newline and parses, its case is
// the shard's, and together they are as many as the record counts.
void read_lines(Shard& s) {
  const std::string path = s.dir + "/index.jsonl";
  const json& rates = s.record["rates"];
  const int64_t expected = rates.value("findings", int64_t{0}) + rates.value("harness_errors", int64_t{0});
  if (!fs::exists(path)) {
    if (expected == 0) return;
    throw InvalidCase(path + " not found, though campaign.json counts " + std::to_string(expected) +
                      " finding line(s)");
  }
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream lines(text);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    const std::string where = path + " line " + std::to_string(n);
    if (lines.eof() && !text.ends_with("\n"))
      throw InvalidCase(where + ": cut short (no newline at its end: the shard was killed while writing it)");
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json e = parse_json(line, where);
    if (!e.is_object() || !e.contains("key") || !e["key"].is_string() || !e.contains("case_index") ||
        !e["case_index"].is_number_integer() || !e.contains("case_seed") || !e.contains("fingerprint"))
      throw InvalidCase(where + ": not a finding line (key, fingerprint, case_index, case_seed)");
    const int64_t c = e["case_index"].get<int64_t>();
    if (!s.rule().owns(c))
      throw InvalidCase(where + ": case " + std::to_string(c) + " is not one of shard " + std::to_string(s.index) +
                        "/" + std::to_string(s.count) + "'s");
    s.lines.push_back(std::move(e));
  }
  if (static_cast<int64_t>(s.lines.size()) != expected)
    throw InvalidCase(path + ": " + std::to_string(s.lines.size()) + " finding line(s), but campaign.json counts " +
                      std::to_string(expected) + " (the index was cut short, or is another run's)");
}

// Every shard of one campaign, each once.
void check_shards(const std::vector<Shard>& shards) {
  const Shard& first = shards.front();
  std::map<int, const Shard*> by_index;
  for (const Shard& s : shards) {
    for (const char* k : kCampaignSettings) {
      const json a = first.record["settings"].value(k, json()), b = s.record["settings"].value(k, json());
      if (a != b)
        throw InvalidCase(s.dir + ": another campaign than " + first.dir + "'s (" + k + " " + b.dump() + ", not " +
                          a.dump() + ")");
    }
    if (s.count != first.count)
      throw InvalidCase(s.dir + ": shard " + std::to_string(s.index) + "/" + std::to_string(s.count) + ", but " +
                        first.dir + " is a shard of " + std::to_string(first.count));
    const auto [it, fresh] = by_index.emplace(s.index, &s);
    if (!fresh)
      throw InvalidCase(it->second->dir + " and " + s.dir + " are both shard " + std::to_string(s.index) + "/" +
                        std::to_string(s.count) + " (a shard given twice)");
  }
  std::string missing;
  for (int i = 0; i < first.count; ++i)
    if (!by_index.contains(i)) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
  if (!missing.empty())
    throw InvalidCase("shard(s) " + missing + " of " + std::to_string(first.count) +
                      " missing: a merge needs every shard's folder (kvfuzz run --shard I/" +
                      std::to_string(first.count) + ")");
}

// Where a line's saved case is: in its shard's folder, else where the line says (relative to
// where the shard ran).
std::string locate(const Shard& s, const std::string& saved, const std::string& where) {
  const std::string inside = s.dir + "/" + fs::path(saved).filename().string();
  if (fs::exists(inside)) return inside;
  if (fs::exists(saved)) return saved;
  throw InvalidCase(where + ": saved case " + saved + " not found (nor as " + inside + ")");
}

// Copies a saved case's files (case, report, fingerprint record; its shrunk form's too) into OUT,
// their replay lines naming the copies.
void copy_saved(const std::string& from_base, const std::string& old_base, const std::string& new_base) {
  for (const std::string ext : {".json", ".min.json"}) {
    if (!fs::exists(from_base + ext)) continue;
    const std::string old_case = old_base + ext, new_case = new_base + ext;
    write_file_atomic(new_case, read_input(from_base + ext, kMaxCaseBytes));
    const std::string stem = ext == std::string(".json") ? "" : ".min";
    const std::string txt = from_base + stem + ".txt";
    if (fs::exists(txt)) {
      std::string report = read_input(txt, kMaxCaseBytes);
      rename_case(report, old_case, new_case);
      write_file_atomic(new_base + stem + ".txt", report);
    }
    const std::string rec = finding_record_path(from_base + ext);
    if (fs::exists(rec)) {
      json r = parse_json(read_input(rec, kMaxCaseBytes), rec);
      r["case"] = new_case;
      std::string replay = r.value("replay", "");
      rename_case(replay, old_case, new_case);
      r["replay"] = replay;
      write_file_atomic(finding_record_path(new_case), r.dump(2) + "\n");
    }
  }
}

// The command that prints a line's case (as the campaign wrote it for an unsaved one).
std::string gen_of(const json& line) {
  CaseDraw d;
  d.seed = line["case_seed"].get<uint64_t>();
  if (line.contains("shape_seed")) d.shape_seed = line["shape_seed"].get<uint64_t>();
  const auto profile = parse_profile(line.value("profile", "small"));
  return gen_command(d, profile.value_or(Profile::small));
}

json add_numbers(json into, const json& more) {  // the numbers of two objects alike, added
  for (const auto& [k, v] : more.items()) {
    if (v.is_object()) into[k] = add_numbers(into.value(k, json::object()), v);
    else if (v.is_number_integer()) into[k] = into.value(k, int64_t{0}) + v.get<int64_t>();
  }
  return into;
}

json merged_record(const std::vector<Shard>& shards, const MergeResult& r) {
  json settings = shards.front().record["settings"];
  settings.erase("shard");
  settings["shards"] = r.count;
  json backends = json::object(), variants = json::object(), shard_list = json::array();
  CoverageCounts counts;
  Coverage touched;
  int64_t cases = 0, findings = 0, harness = 0, cores = 0;
  double longest = 0, total = 0;
  bool stopped = false;
  std::set<std::string> hosts;
  for (const Shard& s : shards) {
    const json& rec = s.record;
    const json& rates = rec["rates"];
    backends = add_numbers(backends, rec.value("backends", json::object()));
    variants = add_numbers(variants, rec.value("variants", json::object()));
    try {
      CoverageCounts c;
      const json by_backend =
          rec["coverage"].value("by_backend", json::object());  // named: items() must not outlive it
      for (const auto& [name, b] : by_backend.items()) c.by_backend[name] = backend_coverage_from_json(b);
      counts.merge(c);
      touched.merge(Coverage::from_json(rec["coverage"]["touched"]));
    } catch (const std::exception& e) {
      throw InvalidCase(s.dir + "/campaign.json: malformed coverage (" + e.what() + ")");
    }
    cases += rates.value("cases", int64_t{0});
    findings += rates.value("findings", int64_t{0});
    harness += rates.value("harness_errors", int64_t{0});
    const double seconds = rates.value("seconds", 0.0);
    longest = std::max(longest, seconds);
    total += seconds;
    stopped |= rec.value("stopped", false);
    const json host = rec.value("host", json::object());
    hosts.insert(host.value("name", ""));
    cores += host.value("cores", int64_t{0});
    shard_list.push_back({{"shard", rec["settings"].value("shard", "0/1")},
                          {"folder", s.dir},
                          {"host", host.value("name", "")},
                          {"cases", rates.value("cases", int64_t{0})},
                          {"seconds", seconds},
                          {"cases_per_second", rates.value("cases_per_second", 0.0)},
                          {"findings", rates.value("findings", int64_t{0})},
                          {"stopped", rec.value("stopped", false)}});
  }
  std::string host_names;
  for (const std::string& h : hosts) host_names += (host_names.empty() ? "" : ", ") + h;
  json coverage = {{"line", touched.line()}, {"by_backend", json::object()}, {"touched", touched.to_json()}};
  for (const auto& [name, c] : counts.by_backend) coverage["by_backend"][name] = to_json(c);
  int64_t kinds = 0;
  for (const auto& [key, k] : r.keys) kinds += key.starts_with("harness-error: ") ? 0 : 1;
  const json record = {{"format", "kvfuzz-campaign"},
                       {"version", kCampaignRecordVersion},
                       {"finished", true},
                       {"stopped", stopped},
                       {"written", utc_time_now()},
                       {"host", {{"name", host_names}, {"cores", cores}}},
                       {"settings", settings},
                       {"rates",
                        {{"cases", cases},
                         {"seconds", longest},
                         {"cases_per_second", longest > 0 ? static_cast<double>(cases) / longest : 0.0},
                         {"shard_seconds", total},
                         {"findings", findings},
                         {"finding_kinds", kinds},
                         {"harness_errors", harness}}},
                       {"shards", shard_list},
                       {"backends", backends},
                       {"variants", variants},
                       {"coverage", coverage}};
  return record;
}

}  // namespace

MergeResult merge_campaigns(const std::string& out, const std::vector<std::string>& dirs) {
  if (dirs.empty()) throw InvalidCase("kvfuzz merge: no shard folders given");
  if (fs::exists(out) && (!fs::is_directory(out) || !fs::is_empty(out)))
    throw InvalidCase(out + ": exists and is not an empty folder (kvfuzz merge writes a new one)");
  std::vector<Shard> shards;
  for (const std::string& d : dirs) shards.push_back(read_shard(d));
  check_shards(shards);
  std::sort(shards.begin(), shards.end(), [](const Shard& a, const Shard& b) { return a.index < b.index; });
  for (Shard& s : shards) read_lines(s);

  MergeResult r;
  r.out = out;
  r.seed = shards.front().record["settings"].value("seed", uint64_t{0});
  r.count = shards.front().count;
  const json& settings = shards.front().record["settings"];
  const int64_t campaign_cases = settings.value("cases", int64_t{0});
  const size_t max_saved = static_cast<size_t>(std::max(1, settings.value("max_saved_per_kind", 3)));
  // Every line, with the shard it came from; saved cases gathered per fingerprint key.
  std::vector<std::pair<json, const Shard*>> lines;
  std::map<std::string, std::vector<Candidate>> candidates;
  for (const Shard& s : shards) {
    const json& rates = s.record["rates"];
    MergedShard m{s.dir,
                  s.record.value("host", json::object()).value("name", ""),
                  s.index,
                  rates.value("cases", int64_t{0}),
                  -1,
                  rates.value("findings", int64_t{0}),
                  rates.value("seconds", 0.0),
                  s.record.value("stopped", false)};
    if (campaign_cases > 0)
      m.expected_cases = campaign_cases > s.index ? (campaign_cases - s.index + s.count - 1) / s.count : 0;
    r.shards.push_back(m);
    for (size_t n = 0; n < s.lines.size(); ++n) {
      const json& e = s.lines[n];
      const std::string key = e["key"].get<std::string>();
      r.keys[key].cases++;
      if (e.contains("saved") && e["saved"].is_string()) {
        const std::string saved = e["saved"].get<std::string>();
        const std::string file = locate(s, saved, s.dir + "/index.jsonl line " + std::to_string(n + 1));
        candidates[key].push_back({lines.size(), file, saved, file.ends_with(".min.json"), fs::file_size(file),
                                   e["case_index"].get<int64_t>()});
      }
      lines.emplace_back(e, &s);
    }
  }
  fs::create_directories(out);
  // Per key the smallest saved cases, shrunk ones first; the others' lines regenerate their case.
  for (auto& [key, list] : candidates) {
    std::sort(list.begin(), list.end(), [](const Candidate& a, const Candidate& b) {
      return std::tuple(!a.shrunk, a.bytes, a.case_index) < std::tuple(!b.shrunk, b.bytes, b.case_index);
    });
    for (size_t k = 0; k < list.size(); ++k) {
      const Candidate& c = list[k];
      json& line = lines[c.line].first;
      std::string replay = line.value("replay", "");
      if (k < max_saved) {
        const std::string new_base = out + "/" + fs::path(base_of(c.file)).filename().string();
        const std::string new_saved = new_base + (c.shrunk ? ".min.json" : ".json");
        copy_saved(base_of(c.file), base_of(c.saved), new_base);
        rename_case(replay, c.saved, new_saved);
        line["saved"] = new_saved;
        r.keys[key].saved.push_back(new_saved);
        r.saved_kept++;
      } else {
        // As the campaign writes an unsaved line: the case is written where the check runs, first.
        const std::string file = "case-" + std::to_string(c.case_index) + ".json";
        rename_case(replay, c.saved, file, true);
        const size_t in_cd = replay.starts_with("(cd ") ? replay.find(" && ") : std::string::npos;
        const size_t at = in_cd == std::string::npos ? 0 : in_cd + 4;
        replay.insert(at, gen_of(line) + " > " + file + " && ");
        line["saved"] = nullptr;
        r.saved_dropped++;
      }
      line["replay"] = replay;
    }
  }
  std::stable_sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) {
    return a.first["case_index"].template get<int64_t>() < b.first["case_index"].template get<int64_t>();
  });
  std::string index;
  for (const auto& [line, shard] : lines) index += line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  r.lines = static_cast<int64_t>(lines.size());
  write_file_atomic(out + "/index.jsonl", index);
  write_file_atomic(out + "/campaign.json", merged_record(shards, r).dump(1) + "\n");  // last: the merge is whole
  return r;
}

void print_merge(const MergeResult& r, std::ostream& os) {
  os << "kvfuzz merge: " << r.shards.size() << " shard(s) of campaign seed " << r.seed << " into " << r.out << "/\n";
  int64_t cases = 0;
  double longest = 0;
  for (const MergedShard& s : r.shards) {
    cases += s.cases;
    longest = std::max(longest, s.seconds);
    os << "  shard " << s.index << "/" << r.count << "  " << std::setw(8) << s.cases << " cases  " << std::fixed
       << std::setprecision(1) << std::setw(7) << s.seconds << " s  " << std::setw(8)
       << (s.seconds > 0 ? static_cast<double>(s.cases) / s.seconds : 0.0) << " cases/s  " << std::setw(6) << s.findings
       << " findings  " << s.host << "  " << s.dir;
    if (s.stopped) os << "  (interrupted by a signal)";
    if (s.expected_cases >= 0 && s.cases < s.expected_cases)
      os << "  (ran " << s.cases << " of its " << s.expected_cases << " cases)";
    os << "\n";
  }
  os << "merged: " << cases << " cases, longest shard " << std::fixed << std::setprecision(1) << longest << " s ("
     << (longest > 0 ? static_cast<double>(cases) / longest : 0.0) << " cases/s together); " << r.lines
     << " index line(s), " << r.keys.size() << " fingerprint key(s); saved cases: " << r.saved_kept
     << " kept (the smallest per key), " << r.saved_dropped << " left out (their index lines regenerate them)\n";
  for (const MergedShard& s : r.shards)
    if (s.stopped || (s.expected_cases >= 0 && s.cases < s.expected_cases))
      os << "warning: shard " << s.index << "/" << r.count << " (" << s.dir
         << ") did not run all its cases: the merged campaign is that much smaller\n";
  for (const auto& [key, k] : r.keys)
    os << "  " << std::setw(6) << k.cases << "  " << key << (k.saved.empty() ? "" : "  " + k.saved.front()) << "\n";
}

}  // namespace kvfuzz
