#include "reference/scenario_json.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "reference/case_error.h"
#include "reference/io.h"
#include "reference/validate.h"

namespace kvfuzz {
namespace {

using json = nlohmann::ordered_json;

// ------------------------------------------------------------------------------ writing --

json layer_json(const Layer& l) {
  json j = {{"kind", to_string(l.kind)}};
  if (l.kind == LayerKind::sliding_window) j["window"] = l.window;
  if (l.kind == LayerKind::chunked) j["chunk"] = l.chunk;
  // Written only when not 1: a case without scales keeps its bytes.
  if (l.k_scale != 1.0f) j["k_scale"] = static_cast<double>(l.k_scale);
  if (l.v_scale != 1.0f) j["v_scale"] = static_cast<double>(l.v_scale);
  return j;
}

json op_json(const Op& op) {
  json j = {{"op", to_string(op.kind)}, {"request", op.request}};
  if (op.kind == OpKind::extend || op.kind == OpKind::share) j["len"] = op.len;
  if (op.kind == OpKind::share) j["from"] = op.from;
  if (op.kind == OpKind::draft) j["parents"] = op.parents;
  if (op.kind == OpKind::accept) j["path"] = op.path;
  return j;
}

json batch_json(const Batch& b) {
  json entries = json::array();
  for (const BatchEntry& e : b.entries) {
    json je = {{"request", e.request}};
    if (uses_extend_len(b.mode)) je["extend_len"] = e.extend_len;
    if (b.mode == Mode::target_verify) je["parents"] = e.parents;
    entries.push_back(std::move(je));
  }
  json j = {{"mode", to_string(b.mode)}, {"entries", std::move(entries)}};
  if (b.mode == Mode::target_verify) j["draft_tokens"] = b.draft_tokens;
  if (b.mode == Mode::target_verify || b.mode == Mode::draft_decode) j["topk"] = b.topk;
  if (is_drafting_step(b.mode)) {
    j["draft_steps"] = b.draft_steps;
    j["draft_step"] = b.draft_step;
  }
  j["graph_bs"] = b.graph_bs;
  j["kv_splits"] = b.kv_splits;
  j["device_sms"] = b.device_sms;
  return j;
}

// A case with a share op needs version 3; others are written as version 2, which older tools read.
bool uses_share(const std::vector<Op>& history) {
  return std::any_of(history.begin(), history.end(), [](const Op& op) { return op.kind == OpKind::share; });
}

json scenario_json(const Scenario& s) {
  json layers = json::array();
  for (const Layer& l : s.model.layers) layers.push_back(layer_json(l));
  json history = json::array();
  for (const Op& op : s.history) history.push_back(op_json(op));
  json j = {
      {"version", uses_share(s.history) ? kShareScenarioVersion : 2},
      {"model",
       {{"q_heads", s.model.q_heads},
        {"kv_heads", s.model.kv_heads},
        {"head_dim", s.model.head_dim},
        {"v_head_dim", s.model.v_head_dim},
        {"mla", s.model.mla},
        {"sm_scale", s.model.sm_scale},
        {"softcap", s.model.softcap},
        {"layers", std::move(layers)}}},
      {"cache",
       {{"page_size", s.cache.page_size},
        {"full_pages", s.cache.full_pages},
        {"swa_pages", s.cache.swa_pages},
        {"max_requests", s.cache.max_requests},
        {"max_context_len", s.cache.max_context_len},
        {"sort_free", s.cache.sort_free}}},
      {"history", std::move(history)},
      {"batch", batch_json(s.batch)},
      {"values",
       {{"seed", s.values.seed},
        {"dtype", std::string(to_string(s.values.dtype))},
        {"fill", to_string(s.values.fill)},
        {"poison", s.values.poison}}},
  };
  // Written only when there are sinks: a case without keeps its bytes.
  if (!s.model.sinks.empty()) j["model"]["sinks"] = s.model.sinks;
  return j;
}

// Pretty printing that keeps small things on one line: a container holding only scalars is
// written inline, so a history op or a parent array is one line a person can read.
bool is_leaf(const json& j) {
  if (!j.is_structured()) return true;
  for (const auto& v : j) {
    if (v.is_structured()) return false;
  }
  return true;
}

void emit_inline(const json& j, std::string& out) {
  if (!j.is_structured()) {
    out += j.dump();
    return;
  }
  const bool object = j.is_object();
  out += object ? "{" : "[";
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!first) out += ", ";
    first = false;
    if (object) out += json(it.key()).dump() + ": ";
    emit_inline(it.value(), out);
  }
  out += object ? "}" : "]";
}

void emit(const json& j, int indent, std::string& out) {
  if (is_leaf(j)) {
    emit_inline(j, out);
    return;
  }
  const std::string pad(static_cast<size_t>(indent + 2), ' ');
  const bool object = j.is_object();
  out += object ? "{\n" : "[\n";
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!first) out += ",\n";
    first = false;
    out += pad;
    if (object) out += json(it.key()).dump() + ": ";
    emit(it.value(), indent + 2, out);
  }
  out += "\n" + std::string(static_cast<size_t>(indent), ' ') + (object ? "}" : "]");
}

// ------------------------------------------------------------------------------ reading --

// A JSON object being read: each field is taken once, with its path for messages, and fields
// nobody took are reported (they are typos or come from another version).
class Fields {
 public:
  Fields(const json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j_.is_object()) fail(path_, "expected an object");
  }

  const json& take(const std::string& key) {
    auto it = j_.find(key);
    if (it == j_.end()) fail(sub(key), "missing");
    taken_.insert(key);
    return *it;
  }
  bool has(const std::string& key) const { return j_.contains(key); }
  std::string sub(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  int32_t int32(const std::string& key) { return as_int32(take(key), sub(key)); }
  double number(const std::string& key) {
    const json& v = take(key);
    if (!v.is_number()) fail(sub(key), "expected a number");
    const double d = v.get<double>();
    if (!std::isfinite(d)) fail(sub(key), "expected a finite number");
    return d;
  }
  bool boolean(const std::string& key) {
    const json& v = take(key);
    if (!v.is_boolean()) fail(sub(key), "expected true or false");
    return v.get<bool>();
  }
  std::string string(const std::string& key) {
    const json& v = take(key);
    if (!v.is_string()) fail(sub(key), "expected a string");
    return v.get<std::string>();
  }
  std::vector<int32_t> int_list(const std::string& key) {
    const json& v = take(key);
    if (!v.is_array()) fail(sub(key), "expected an array of integers");
    std::vector<int32_t> out;
    out.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i) out.push_back(as_int32(v[i], sub(key) + "[" + std::to_string(i) + "]"));
    return out;
  }

  void finish() const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (!taken_.count(it.key())) fail(sub(it.key()), "unknown field");
    }
  }

  [[noreturn]] static void fail(const std::string& path, const std::string& what) {
    throw InvalidCase((path.empty() ? std::string("case") : path) + ": " + what);
  }

  static int32_t as_int32(const json& v, const std::string& path) {
    if (v.is_number_unsigned()) {
      if (v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
        return static_cast<int32_t>(v.get<uint64_t>());
    } else if (v.is_number_integer()) {
      const int64_t x = v.get<int64_t>();
      if (x >= std::numeric_limits<int32_t>::min() && x <= std::numeric_limits<int32_t>::max())
        return static_cast<int32_t>(x);
    } else {
      fail(path, "expected an integer");
    }
    fail(path, "integer out of the 32-bit range");
  }

 private:
  const json& j_;
  std::string path_;
  std::set<std::string> taken_;
};

template <class Enum>
Enum parse_enum(const std::string& value, const std::string& path, std::initializer_list<Enum> names) {
  std::string choices;
  for (Enum e : names) {
    if (to_string(e) == value) return e;
    choices += (choices.empty() ? "" : ", ") + std::string(to_string(e));
  }
  Fields::fail(path, "'" + value + "' is not one of " + choices);
}

const json& array_at(Fields& f, const std::string& key) {
  const json& v = f.take(key);
  if (!v.is_array()) Fields::fail(f.sub(key), "expected an array");
  return v;
}

std::string index_path(const std::string& base, size_t i) { return base + "[" + std::to_string(i) + "]"; }

Model read_model(const json& j) {
  Fields f(j, "model");
  Model m;
  m.q_heads = f.int32("q_heads");
  m.kv_heads = f.int32("kv_heads");
  m.head_dim = f.int32("head_dim");
  m.v_head_dim = f.int32("v_head_dim");
  m.mla = f.boolean("mla");
  m.sm_scale = f.number("sm_scale");
  m.softcap = f.number("softcap");
  if (f.has("sinks")) {
    const json& sinks = array_at(f, "sinks");
    for (size_t i = 0; i < sinks.size(); ++i) {
      if (!sinks[i].is_number() || !std::isfinite(sinks[i].get<double>()))
        Fields::fail(index_path("model.sinks", i), "expected a finite number (a q head's sink logit)");
      m.sinks.push_back(sinks[i].get<double>());
    }
    if (m.sinks.empty()) Fields::fail("model.sinks", "empty: leave the field out for a model without sinks");
  }
  const json& layers = array_at(f, "layers");
  for (size_t i = 0; i < layers.size(); ++i) {
    Fields lf(layers[i], index_path("model.layers", i));
    Layer l;
    l.kind = parse_enum<LayerKind>(lf.string("kind"), lf.sub("kind"),
                                   {LayerKind::full, LayerKind::sliding_window, LayerKind::chunked});
    if (l.kind == LayerKind::sliding_window) l.window = lf.int32("window");
    if (l.kind == LayerKind::chunked) l.chunk = lf.int32("chunk");
    for (auto [key, scale] : {std::pair{"k_scale", &l.k_scale}, std::pair{"v_scale", &l.v_scale}}) {
      if (!lf.has(key)) continue;  // absent: 1, unscaled
      const double d = lf.number(key);
      if (static_cast<double>(static_cast<float>(d)) != d)
        Fields::fail(lf.sub(key), "expected a float32 value (vLLM's scales are float32)");
      *scale = static_cast<float>(d);
    }
    lf.finish();
    m.layers.push_back(l);
  }
  f.finish();
  return m;
}

CacheConfig read_cache(const json& j) {
  Fields f(j, "cache");
  CacheConfig c;
  c.page_size = f.int32("page_size");
  c.full_pages = f.int32("full_pages");
  c.swa_pages = f.int32("swa_pages");
  c.max_requests = f.int32("max_requests");
  c.max_context_len = f.int32("max_context_len");
  c.sort_free = f.boolean("sort_free");
  f.finish();
  return c;
}

std::vector<Op> read_history(const json& history, int32_t version) {
  std::vector<Op> ops;
  ops.reserve(history.size());
  for (size_t i = 0; i < history.size(); ++i) {
    Fields f(history[i], index_path("history", i));
    Op op;
    op.kind = parse_enum<OpKind>(f.string("op"), f.sub("op"),
                                 {OpKind::admit, OpKind::extend, OpKind::decode, OpKind::free, OpKind::swa_evict,
                                  OpKind::draft, OpKind::accept, OpKind::share});
    if (op.kind == OpKind::share && version < kShareScenarioVersion)
      Fields::fail(f.sub("op"), "share needs case version " + std::to_string(kShareScenarioVersion) + " (is " +
                                    std::to_string(version) + ")");
    op.request = f.int32("request");
    if (op.kind == OpKind::extend || op.kind == OpKind::share) op.len = f.int32("len");
    if (op.kind == OpKind::share) op.from = f.int32("from");
    if (op.kind == OpKind::draft) op.parents = f.int_list("parents");
    if (op.kind == OpKind::accept) op.path = f.int_list("path");
    f.finish();
    ops.push_back(std::move(op));
  }
  return ops;
}

Batch read_batch(const json& j, int32_t version) {
  Fields f(j, "batch");
  Batch b;
  b.mode = parse_enum<Mode>(f.string("mode"), f.sub("mode"),
                            {Mode::idle, Mode::decode, Mode::extend, Mode::mixed, Mode::target_verify,
                             Mode::draft_extend_v2, Mode::draft_decode, Mode::draft_q_only});
  const json& entries = array_at(f, "entries");
  for (size_t i = 0; i < entries.size(); ++i) {
    Fields ef(entries[i], index_path("batch.entries", i));
    BatchEntry e;
    e.request = ef.int32("request");
    if (uses_extend_len(b.mode)) e.extend_len = ef.int32("extend_len");
    if (b.mode == Mode::target_verify) e.parents = ef.int_list("parents");
    ef.finish();
    b.entries.push_back(std::move(e));
  }
  if (b.mode == Mode::target_verify) b.draft_tokens = f.int32("draft_tokens");
  if (b.mode == Mode::target_verify || b.mode == Mode::draft_decode) b.topk = f.int32("topk");
  if (is_drafting_step(b.mode)) {
    b.draft_steps = f.int32("draft_steps");
    b.draft_step = f.int32("draft_step");
  }
  b.graph_bs = f.int32("graph_bs");
  b.kv_splits = f.int32("kv_splits");
  if (version >= 2) b.device_sms = f.int32("device_sms");
  f.finish();
  return b;
}

ValueConfig read_values(const json& j) {
  Fields f(j, "values");
  ValueConfig v;
  const json& seed = f.take("seed");
  if (!seed.is_number_unsigned() && !(seed.is_number_integer() && seed.get<int64_t>() >= 0))
    Fields::fail("values.seed", "expected an integer in [0, 2^64)");
  v.seed = seed.get<uint64_t>();
  const std::string dtype = f.string("dtype");
  const auto d = parse_dtype(dtype);
  if (!d) Fields::fail("values.dtype", "'" + dtype + "' is not one of fp32, fp16, bf16, fp8_e4m3");
  v.dtype = *d;
  v.fill = parse_enum<Fill>(f.string("fill"), "values.fill", {Fill::random, Fill::signature});
  v.poison = f.boolean("poison");
  f.finish();
  return v;
}

// nlohmann's parser recurses once per nesting level; a case needs four levels, so anything much
// deeper is rejected before parsing rather than risking the stack.
void check_depth(std::string_view text) {
  constexpr int kMaxDepth = 16;
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth)
        throw InvalidCase("case: nested deeper than " + std::to_string(kMaxDepth) + " levels at byte " +
                          std::to_string(i));
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

}  // namespace

std::string to_json(const Scenario& s) {
  std::string out;
  emit(scenario_json(s), 0, out);
  out += "\n";
  return out;
}

Scenario scenario_from_json(std::string_view text) {
  check_depth(text);
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {  // parse errors, and numbers too large to represent
    throw InvalidCase(std::string("case: not valid JSON: ") + e.what());
  }
  Fields f(j, "");
  const int32_t version = f.int32("version");
  if (version < kOldestScenarioVersion || version > kScenarioVersion)
    Fields::fail("version", std::to_string(version) + " is not supported (this kvfuzz reads versions " +
                                std::to_string(kOldestScenarioVersion) + " to " + std::to_string(kScenarioVersion) +
                                ")");
  Scenario s;
  s.model = read_model(f.take("model"));
  s.cache = read_cache(f.take("cache"));
  const json& history = f.take("history");
  if (!history.is_array()) Fields::fail("history", "expected an array");
  s.history = read_history(history, version);
  s.batch = read_batch(f.take("batch"), version);
  s.values = read_values(f.take("values"));
  f.finish();
  return s;
}

Scenario load_case(const std::string& path) {
  const std::string where = path == "-" ? "<stdin>" : path;
  try {
    Scenario s = scenario_from_json(read_input(path, kMaxCaseBytes));
    validate(s);
    return s;
  } catch (const InvalidCase& e) {
    const std::string what = e.what();
    if (what.rfind(path + ":", 0) == 0) throw;
    throw InvalidCase(where + ": " + what);
  }
}

}  // namespace kvfuzz
