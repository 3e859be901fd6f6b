#include "properties/fingerprint.h"

#include <algorithm>
#include <regex>

namespace kvfuzz {
namespace {

// "sglang_fa_0_5_10_post1_det" -> release "0.5.10.post1", the rest "sglang_fa_det".
void split_release(const std::string& planner, std::string& rest, std::string& release) {
  static const std::regex re("_(\\d+)_(\\d+)_(\\d+)(_post\\d+|_rc\\d+)?(?=_|$)");
  std::smatch m;
  rest = planner;
  release.clear();
  if (!std::regex_search(planner, m, re)) return;
  release = m[1].str() + "." + m[2].str() + "." + m[3].str();
  if (m[4].matched) release += "." + m[4].str().substr(1);
  rest = m.prefix().str() + m.suffix().str();
}

// Whether some batch request's last op that grew it is an accept (its target step was a verify).
bool drafts_after_verify(const Scenario& s) {
  for (const BatchEntry& e : s.batch.entries) {
    bool verify = false;
    for (const Op& op : s.history) {
      if (op.request != e.request) continue;
      if (op.kind == OpKind::accept) verify = true;
      if (op.kind == OpKind::extend || op.kind == OpKind::decode || op.kind == OpKind::share ||
          op.kind == OpKind::admit || op.kind == OpKind::free)
        verify = false;
    }
    if (verify) return true;
  }
  return false;
}

}  // namespace

std::string normalize_message(const std::string& message) {
  std::string s = message.substr(0, message.find('\n'));
  // The location prefix describe_row() writes.
  // Compiled once: every finding's fingerprint goes through here.
  static const std::pair<std::regex, const char*> kRules[] = {
      {std::regex("^layer \\d+ \\([a-z_]+\\)(, row \\d+ \\((request \\d+|padded)\\))?(, query position \\d+ \\(column \\d+\\))?: "), ""},
      {std::regex("'[^']*'"), "Q"},
      {std::regex("\"[^\"]*\""), "Q"},
      {std::regex("0x[0-9a-fA-F]+"), "N"},
      {std::regex("-?\\d+(\\.\\d+)?(e[-+]?\\d+)?"), "N"},
      {std::regex("N(\\.\\.N|, N)+"), "N"},
      {std::regex("\\s+"), " "},
  };
  for (const auto& [re, with] : kRules) s = std::regex_replace(s, re, with);
  if (s.size() > 160) s.resize(160);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string failure_mechanism(const std::string& message) {
  // A Python traceback: its exception line ("IndexError: ...", "torch.AcceleratorError: CUDA error:
  // ...": the last line naming an Error or Exception, as CUDA errors add advice lines after it) and
  // its last "File ..., in f" line, the innermost function.
  static const std::regex frame("^\\s*File \"[^\"]*\", line \\d+, in (\\S+)");
  static const std::regex exception("^[A-Za-z_][\\w.]*(Error|Exception|Interrupt|Exit)\\b");
  std::string last, raised, function;
  size_t start = 0;
  while (start < message.size()) {
    size_t end = message.find('\n', start);
    if (end == std::string::npos) end = message.size();
    const std::string line = message.substr(start, end - start);
    std::smatch m;
    if (std::regex_search(line, m, frame)) function = m[1].str();
    if (line.find_first_not_of(" \t") != std::string::npos && line.rfind("  ", 0) != 0) last = line;
    if (std::regex_search(line, exception)) raised = line;
    start = end + 1;
  }
  const bool traceback = message.find("Traceback (most recent call last)") != std::string::npos;
  // Without a traceback the failure is its first line, without what the adapter printed last (a
  // hang's log tail is there or not by timing) and whichever run it happened in (the case's own
  // or the probes' reruns): one failure, one key.
  std::string head = message.substr(0, message.find("; its last output:"));
  static const std::string kProbe = "probe runs failed: ";
  if (head.rfind(kProbe, 0) == 0) head.erase(0, kProbe.size());
  std::string what = normalize_message(!traceback ? head : !raised.empty() ? raised : last);
  if (traceback && !function.empty()) what += " @ " + function;
  return what;
}

std::string bounds_mechanism(const std::string& buffer, const std::string& what) {
  std::string direction;
  if (what.find("guard zone before") != std::string::npos) direction = "guard-before";
  else if (what.find("guard zone after") != std::string::npos) direction = "guard-after";
  else if (what.find("outside the pool") != std::string::npos) direction = "outside";
  else if (what.find("negative capacity") != std::string::npos) direction = "negative-capacity";
  else {
    static const std::regex access("^(read|write)\\w* at index (-?)\\d+");
    std::smatch m;
    if (std::regex_search(what, m, access)) direction = m[1].str() + (m[2].matched && m[2].length() > 0 ? "-below" : "-above");
    else direction = normalize_message(what);
  }
  return buffer + ":" + direction;
}

std::string Fingerprint::key() const {
  std::string k = property + "/" + backend + "/" + mode + "/" + (layer_kind.empty() ? "-" : layer_kind) + ": " + mechanism;
  if (!variant.empty()) k += " @" + variant;
  return k;
}

nlohmann::json Fingerprint::to_json() const {
  nlohmann::json layer = nullptr;
  if (!layer_kind.empty()) layer = {{"kind", layer_kind}, {"window", window}, {"chunk", chunk}};
  nlohmann::json j = {{"key", key()},
                      {"property", property},
                      {"backend", backend},
                      {"planner", planner},
                      {"executor", executor},
                      {"release", release},
                      {"mode", mode},
                      {"layer", layer},
                      {"mechanism", mechanism},
                      {"variant", variant},
                      {"context",
                       {{"page_size", page_size},
                        {"topk", topk},
                        {"hybrid", hybrid},
                        {"sliding_layers", sliding_layers},
                        {"graph", graph},
                        {"deterministic", deterministic},
                        {"pool_elements", pool_elements},
                        {"head_dim", head_dim},
                        {"v_head_dim", v_head_dim},
                        {"sinks", sinks},
                        {"after_verify", after_verify}}}};
  if (dcp > 1) j["context"]["dcp"] = dcp;
  return j;
}

Fingerprint fingerprint_of(const Scenario& s, const Finding& f) {
  Fingerprint fp;
  fp.property = f.property;
  const size_t colon = f.backend.find(':');
  const std::string planner_full = f.backend.substr(0, colon);
  fp.executor = colon == std::string::npos ? "" : f.backend.substr(colon + 1);
  split_release(planner_full, fp.planner, fp.release);
  fp.backend = fp.planner + (fp.executor.empty() ? "" : ":" + fp.executor);
  fp.mode = to_string(s.batch.mode);
  if (f.layer >= 0 && f.layer < static_cast<int32_t>(s.model.layers.size())) {
    const Layer& l = s.model.layers[static_cast<size_t>(f.layer)];
    fp.layer_kind = to_string(l.kind);
    fp.window = l.kind == LayerKind::sliding_window ? l.window : 0;
    fp.chunk = l.kind == LayerKind::chunked ? l.chunk : 0;
  }
  fp.mechanism = !f.mechanism.empty() ? f.mechanism
                 : (f.property == "crash" || f.property == "hang" || f.property == "contract") ? failure_mechanism(f.message)
                                                                                               : normalize_message(f.message);
  fp.variant = f.variant;
  fp.page_size = s.cache.page_size;
  fp.topk = s.batch.topk;
  fp.hybrid = s.cache.swa_pages > 0;
  fp.sliding_layers = std::any_of(s.model.layers.begin(), s.model.layers.end(),
                                  [](const Layer& l) { return l.kind == LayerKind::sliding_window; });
  fp.graph = s.batch.graph_bs > 0;
  fp.deterministic = planner_full.size() >= 4 && planner_full.compare(planner_full.size() - 4, 4, "_det") == 0;
  fp.pool_elements = int64_t{s.cache.full_pages} * s.cache.page_size * s.model.kv_heads *
                     std::max(s.model.head_dim, s.model.v_head_dim);
  fp.head_dim = s.model.head_dim;
  fp.v_head_dim = s.model.v_head_dim;
  fp.sinks = !s.model.sinks.empty();
  fp.after_verify = s.batch.mode == Mode::draft_decode && drafts_after_verify(s);
  fp.dcp = f.dcp_world;
  return fp;
}

}  // namespace kvfuzz
