#include "properties/root_cause.h"

#include <map>
#include <regex>
#include <set>
#include <tuple>

namespace kvfuzz {
namespace {

// A buffer or message path with its case-specific parts taken out: a variant's prefix ("replay
// variant: "), the dotted path of the step's or layer's metadata ("draft_extend_vN.", "swa.",
// "windowN.decode."), a leading label and numbers. A window layer's metadata translates or clips
// the full layer's, so one wrong length shows in both under one name; a chunked layer's is planned
// apart (local attention's virtual batches) and keeps its mark: "localN.cache_seqlens[N]" becomes
// "chunked: cache_seqlens[N]".
std::string root_text(const std::string& text) {
  static const std::regex chunked("\\b(local|chunk)[\\w()=]*[.:] ?");
  static const std::pair<std::regex, const char*> kRules[] = {
      {std::regex("^[\\w-]+ variant: "), ""},
      {std::regex("[\\w()=]+\\."), ""},
      {std::regex("^\\w+: "), ""},
      {std::regex("\\d+"), "N"},
  };
  const bool chunk = std::regex_search(text, chunked);
  std::string s = std::regex_replace(text, chunked, "");
  for (const auto& [re, with] : kRules) s = std::regex_replace(s, re, with);
  return chunk ? "chunked: " + s : s;
}

// A bounds mechanism of a metadata buffer ("kv_indices:write-above"), not of the KV pool.
bool buffer_bounds(const std::string& mechanism) {
  static const std::regex re(":(read|write)-(above|below)$|:guard-(before|after)$|:negative-capacity$");
  return mechanism.find("KV pool") == std::string::npos && std::regex_search(mechanism, re);
}

// A read set's mechanism (read_diff.h) by kind alone: "foreign" (the worst foreign read: another
// request's slot, an unowned one, past the pool), else its classes of tags: "missing"
// (missing-newest, missing-all, ...: one dropped key shows as any of them, by the query's
// position), "extra", "shifted", and any other tag as it is ("read-twice"), joined by '+' in order.
std::string read_family(const std::string& reads) {
  std::set<std::string> classes;
  size_t start = 0;
  while (start <= reads.size()) {
    size_t end = reads.find('+', start);
    if (end == std::string::npos) end = reads.size();
    const std::string tag = reads.substr(start, end - start);
    static const std::regex own("^(missing|extra|shifted)-");
    std::smatch m;
    static const std::regex foreign("^(other-.*|unowned-slot|unwritten-slot|padding-slot|outside-pool|.*KV pool.*)$");
    if (std::regex_search(tag, m, own)) classes.insert(m[1].str());
    else if (std::regex_match(tag, foreign)) return "foreign";
    else classes.insert(tag);  // read-twice, and what read_diff.h may name later
    start = end + 1;
  }
  std::string out;
  for (const std::string& c : classes) out += (out.empty() ? "" : "+") + c;
  return out;
}

// The order in which an engine computes a layer's metadata: the full layers' first, the window
// and chunk metadata derived from it.
// A finding that names no layer: the layer its metadata path names ("windowN.kv_indptr").
int layer_order(const Fingerprint& fp) {
  const std::string& k = fp.layer_kind;
  if (!k.empty()) return k == "sliding_window" ? 1 : k == "chunked" ? 2 : 0;
  static const std::regex window("\\b(window|swa)\\w*\\."), chunk("\\b(chunk|local)\\w*\\.");
  return std::regex_search(fp.mechanism, window) ? 1 : std::regex_search(fp.mechanism, chunk) ? 2 : 0;
}

}  // namespace

const char* to_string(Stage s) {
  switch (s) {
    case Stage::metadata:
      return "metadata";
    case Stage::table:
      return "table";
    case Stage::reads:
      return "reads";
    case Stage::values:
      return "values";
    case Stage::changed:
      return "changed";
    case Stage::failure:
      return "failure";
  }
  return "?";
}

Stage stage_of(const Fingerprint& fp) {
  const std::string& p = fp.property;
  if (p == "metadata" || p == "plan-run") return Stage::metadata;
  if (p == "stride-divide") return Stage::table;
  if (p == "in-bounds") return buffer_bounds(fp.mechanism) ? Stage::table : Stage::reads;
  if (p == "cache-extent") return Stage::reads;
  if (p == "oracle") return fp.mechanism.rfind("reads:", 0) == 0 ? Stage::reads : Stage::values;
  if (p == "metamorphic" || p == "replay") return Stage::changed;
  return Stage::failure;  // crash, hang, contract, harness-error
}

std::string root_key(const Fingerprint& fp) {
  const std::string head = fp.backend + ": ";
  const std::string& m = fp.mechanism;
  switch (stage_of(fp)) {
    case Stage::metadata:
      return head + "metadata: " + root_text(m);
    case Stage::table:
      if (fp.property == "stride-divide") return head + "table: " + root_text(m.substr(0, m.rfind(':')));
      return head + "bounds: " + root_text(m);
    case Stage::reads:
      return head + "reads: " + read_family(m.rfind("reads:", 0) == 0 ? m.substr(6) : m);
    case Stage::values:
      return head + m;
    case Stage::changed:
      return head + "changed";
    case Stage::failure:
      return head + fp.property + ": " + m;
  }
  return head + m;
}

std::vector<RootCause> root_causes(const std::vector<Fingerprint>& one_case) {
  // The root of each backend's findings: the earliest stage, the layer computed first, the
  // smallest root key.
  using Rank = std::tuple<Stage, int, std::string>;
  std::map<std::string, std::pair<Rank, size_t>> root;  // by backend
  for (size_t i = 0; i < one_case.size(); ++i) {
    const Fingerprint& fp = one_case[i];
    if (stage_of(fp) == Stage::failure) continue;
    const Rank rank{stage_of(fp), layer_order(fp), root_key(fp)};
    const auto it = root.find(fp.backend);
    if (it == root.end() || rank < it->second.first) root[fp.backend] = {rank, i};
  }
  std::vector<RootCause> out;
  for (const Fingerprint& fp : one_case) {
    const auto it = root.find(fp.backend);
    if (stage_of(fp) == Stage::failure || it == root.end()) {
      out.push_back({root_key(fp), std::string("a ") + fp.property + ": a group of its own"});
      continue;
    }
    const auto& [rank, index] = it->second;
    const Fingerprint& r = one_case[index];
    const std::string stage = to_string(std::get<0>(rank));
    if (&fp == &r)
      out.push_back({std::get<2>(rank), "the root: " + stage + " is the earliest stage that failed on its case"});
    else
      out.push_back({std::get<2>(rank), std::string("a ") + to_string(stage_of(fp)) + " finding that follows from " +
                                            stage + " " + r.key() + " on the same case"});
  }
  return out;
}

}  // namespace kvfuzz
