// The data of a standalone reproducer (repro.h): the case's logical content, its layers and seed,
// and the metadata a built-in planner hands the kernel.
#include "fuzz/repro.h"

#include <atomic>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <utility>

#include <unistd.h>

#include "backends/contract/families.h"
#include "backends/external/exchange.h"
#include "backends/registry.h"
#include "reference/case_error.h"
#include "reference/forward_batch.h"
#include "reference/io.h"
#include "reference/logical.h"
#include "reference/scenario_json.h"

namespace kvfuzz {
namespace {

struct BackendName {
  std::string planner, executor;
};

BackendName split(const std::string& backend) {
  const size_t colon = backend.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == backend.size())
    throw InvalidCase("--backend " + backend +
                      ": a reproducer needs a planner:executor pair (e.g. triton:sglang_triton)");
  return {backend.substr(0, colon), backend.substr(colon + 1)};
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// "sglang_triton_0_5_23" -> "0.5.23" (a "_det" or "_fixN" suffix of the adapter's name dropped:
// "sglang_flashinfer_0_5_13_det" -> "0.5.13"); "" for a planner without a release.
std::string release_of(const std::string& planner) {
  for (const char* engine : {"sglang_triton_", "sglang_flashinfer_", "sglang_fa_"}) {
    if (!starts_with(planner, engine)) continue;
    std::string r =
        std::regex_replace(planner.substr(std::string(engine).size()), std::regex("(_det|_fix[0-9]+)+$"), "");
    for (char& c : r)
      if (c == '_') c = '.';
    // "0.5.10.post1" keeps its dot before "post"
    return r;
  }
  return "";
}

nlohmann::json array_json(const NpyArray& a) {
  const std::string& d = a.descr;
  if (d == "<i4") return a.as<int32_t>("plan array");
  if (d == "<i8") return a.as<int64_t>("plan array");
  if (d == "|u1") return a.as<uint8_t>("plan array");
  return a.as_float("plan array");
}

nlohmann::json layer_json(const Layer& l) {
  return {{"kind", to_string(l.kind)}, {"window", l.window}, {"chunk", l.chunk}};
}

// The family's plan of a built-in planner, arrays as lists; null for an external planner.
nlohmann::json plan_json(const Scenario& s, const Prepared& p, const std::string& planner) {
  const Backend* b = find_backend(planner);
  if (b == nullptr) return nullptr;
  if (Support sup = b->supports(s); !sup.ok) throw InvalidCase(planner + " does not plan this case: " + sup.why);
  const std::vector<std::string> no_faults;
  const auto plan = b->plan({s, p.cache, p.batch, no_faults});
  const Family* family = find_family(b->family());
  ArraySet set;
  family->write(*plan, set);
  nlohmann::json arrays = nlohmann::json::object();
  for (const auto& [name, a] : set.arrays) arrays[name] = array_json(a);
  return {{"family", family->name}, {"meta", set.meta}, {"arrays", arrays}};
}

// What an engine planner receives (write_plan_request: the manifest's case and its arrays as
// {"shape", "data"}), for the templates that build the engine's own backend from it.
nlohmann::json engine_request(const Scenario& s, const Prepared& p) {
  static std::atomic<int> counter{0};
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("kvfuzz-repro-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  std::filesystem::create_directories(dir);
  const std::vector<std::string> no_faults;
  write_plan_request(dir.string(), {s, p.cache, p.batch, no_faults});
  const nlohmann::json manifest = nlohmann::json::parse(read_input((dir / "manifest.json").string(), kMaxCaseBytes));
  nlohmann::json arrays = nlohmann::json::object();
  for (const auto& [name, _] : manifest["arrays"].items()) {
    const NpyArray a = read_npy((dir / (name + ".npy")).string());
    arrays[name] = {{"shape", a.shape}, {"data", array_json(a)}};
  }
  std::filesystem::remove_all(dir);
  return {{"case", manifest["case"]}, {"arrays", arrays}};
}

// (request, column) -> slot of the full pool, from the slots' recorded content.
std::map<std::pair<int32_t, int32_t>, int64_t> slot_of(const CacheState& c) {
  std::map<std::pair<int32_t, int32_t>, int64_t> out;
  for (size_t slot = 0; slot < c.full_content.size(); ++slot) {
    const SlotContent& sc = c.full_content[slot];
    if (sc.live()) out[{sc.request, sc.column}] = static_cast<int64_t>(slot);
  }
  return out;
}

nlohmann::json rows_json(const Scenario& s, const Prepared& p, const LogicalBatch& lb) {
  const auto slots = slot_of(p.cache);
  nlohmann::json rows = nlohmann::json::array();
  for (size_t r = 0; r < lb.rows.size(); ++r) {
    const LogicalRow& row = lb.rows[r];
    // Columns as runs [first slot, first position, count] of consecutive slots and positions (a
    // long-profile row of 400k keys is a few thousand runs); slot -1: the column has no slot.
    nlohmann::json columns = nlohmann::json::array();
    for (int32_t c = 0; c < row.kv_cols; ++c) {
      auto it = slots.find({row.request, c});
      const int64_t slot = it == slots.end() ? -1 : it->second;
      const int32_t pos = row.position_of(c);
      if (!columns.empty()) {
        nlohmann::json& run = columns.back();
        const int64_t n = run[2].get<int64_t>();
        const int64_t s0 = run[0].get<int64_t>();
        if (slot >= 0 && s0 >= 0 && slot == s0 + n && pos == run[1].get<int32_t>() + n) {
          run[2] = n + 1;
          continue;
        }
      }
      columns.push_back({slot, pos, 1});
    }
    nlohmann::json queries = nlohmann::json::array();
    for (size_t q = 0; q < row.queries.size(); ++q) {
      const LogicalQuery& lq = row.queries[q];
      nlohmann::json own = nlohmann::json::array();
      for (const ColumnRange& cr : lq.own) own.push_back({cr.begin, cr.end});
      // what it should read in each layer (reference/logical.h's visible set: SEMANTICS.md §3)
      nlohmann::json sees = nlohmann::json::array();
      for (const Layer& layer : s.model.layers) {
        nlohmann::json ranges = nlohmann::json::array();
        for (const ColumnRange& cr : visible(layer, row, static_cast<int32_t>(q))) ranges.push_back({cr.begin, cr.end});
        sees.push_back(ranges);
      }
      queries.push_back({{"token", lb.q_indptr[r] + static_cast<int64_t>(q)},
                         {"column", lq.column},
                         {"position", lq.position},
                         {"own", own},
                         {"visible", sees}});
    }
    rows.push_back({{"request", row.request},
                    {"req_pool_index", p.batch.req_pool_indices[r]},
                    {"prefix_len", row.prefix_len},
                    {"columns", columns},
                    {"queries", queries}});
  }
  return rows;
}

}  // namespace

std::string repro_target(const std::string& backend) {
  const BackendName n = split(backend);
  if (n.planner == "flashinfer_paged" && n.executor == "flashinfer_paged_csr") return "flashinfer_paged_mask";
  if (n.planner == "triton" && n.executor == "sglang_triton") return "sglang_triton_extend";
  if (n.executor == "flex_page_table") return "flex_int32";
  // sglang's own backend classes calling their real kernels: Triton's and FlashInfer's share one
  // template (the backend class picked from the planner)
  for (const char* engine : {"sglang_triton_", "sglang_flashinfer_"})
    if (starts_with(n.planner, engine)) return "sglang_metadata";
  // FA3's kernel (sgl-kernel's flash_attn_with_kvcache, an 852 MB library) is out of reach: the same
  // template runs FlashAttentionBackend with a stand-in kernel of FA3's documented semantics
  if (starts_with(n.planner, "sglang_fa_")) return "sglang_metadata";
  throw InvalidCase("--backend " + backend +
                    ": no reproducer template for this pair (adapters/repro/ has FlashInfer's masked paged "
                    "prefill, sglang's Triton extend kernel, flex attention and sglang's metadata code)");
}

nlohmann::json repro_bundle(const Scenario& s, const std::string& backend, const nlohmann::json& finding) {
  // The templates read each row's keys by (request, column) and make their values from that pair:
  // a shared prefix's columns are another request's (reference/shared_prefix.h), which they do not know.
  for (const Op& op : s.history)
    if (op.kind == OpKind::share)
      throw InvalidCase(
          "the case shares prefix pages (a share op): the reproducer templates do not model shared "
          "prefixes yet; replay it with kvfuzz check");
  // The templates make values from the seed as they were drawn: an fp8 cache's per-tensor scales
  // (Layer::k_scale) would need the stored values and the scales in the kernel call, which they lack.
  for (const Layer& l : s.model.layers)
    if (l.scaled())
      throw InvalidCase(
          "the case has fp8 KV-cache scales (model.layers[].k_scale / v_scale): the reproducer templates "
          "do not model them yet; replay it with kvfuzz check");
  const BackendName n = split(backend);
  const Prepared p = prepare(s);
  const LogicalBatch lb = derive_logical(s);
  nlohmann::json layers = nlohmann::json::array();
  for (const Layer& l : s.model.layers) layers.push_back(layer_json(l));
  const ForwardBatch& fb = p.batch;
  const std::string target = repro_target(backend);
  return {{"kvfuzz_repro", 1},
          {"target", target},
          {"backend", backend},
          {"planner", n.planner},
          {"executor", n.executor},
          {"release", release_of(n.planner)},
          {"finding", finding},
          {"case", nlohmann::json::parse(to_json(s))},
          {"model",
           {{"q_heads", s.model.q_heads},
            {"kv_heads", s.model.kv_heads},
            {"head_dim", s.model.head_dim},
            {"v_head_dim", s.model.v_head_dim},
            {"mla", s.model.mla},
            {"sm_scale", s.model.sm_scale},
            {"softcap", s.model.softcap},
            {"layers", layers}}},
          {"dtype", std::string(to_string(s.values.dtype))},
          {"seed", s.values.seed},
          {"mode", to_string(fb.mode)},
          {"page_size", s.cache.page_size},
          {"topk", fb.topk},
          {"hybrid", p.cache.hybrid},
          {"pool_slots", p.cache.full_slots},
          {"swa_slots", p.cache.swa_slots},
          {"full_to_swa", p.cache.hybrid ? p.cache.full_to_swa : std::vector<int64_t>{}},
          {"num_tokens", fb.num_tokens()},
          {"bs", fb.bs},
          {"positions", fb.positions},
          {"out_cache_loc", fb.out_cache_loc},
          {"rows", rows_json(s, p, lb)},
          {"plan", plan_json(s, p, n.planner)},
          {"engine_request", target.size() > 9 && target.ends_with("_metadata") ? engine_request(s, p) : nullptr}};
}

namespace {

// JSON for a Python raw string: single quotes only occur inside JSON strings, where \u0027 means the same.
std::string raw_safe(std::string data) {
  for (size_t i = data.find('\''); i != std::string::npos; i = data.find('\'', i)) data.replace(i, 1, "\\u0027");
  return data;
}

// The bundle as JSON a person can read: one top-level field a line, each row (a request of the batch)
// a line, each array of the engine's planner request a line (the batch as literal tensors).
std::string bundle_lines(const nlohmann::json& bundle) {
  std::string out = "{";
  bool first = true;
  for (const auto& [key, value] : bundle.items()) {
    out += first ? "\n" : ",\n";
    first = false;
    out += nlohmann::json(key).dump() + ": ";
    if (key == "rows" && value.is_array() && !value.empty()) {
      out += "[";
      for (size_t r = 0; r < value.size(); ++r) out += (r ? ",\n  " : "\n  ") + value[r].dump();
      out += "]";
    } else if (key == "engine_request" && value.is_object()) {
      out += "{\"case\": " + value["case"].dump() + ", \"arrays\": {";
      bool first_array = true;
      for (const auto& [name, a] : value["arrays"].items()) {
        out += (first_array ? "\n  " : ",\n  ") + nlohmann::json(name).dump() + ": " + a.dump();
        first_array = false;
      }
      out += "}}";
    } else {
      out += value.dump();
    }
  }
  return raw_safe(out + "\n}");
}

std::string replace_marker(const std::string& text, const std::string& marker, const std::string& with,
                           const std::string& what) {
  const size_t at = text.find(marker);
  if (at == std::string::npos) throw InvalidCase("reproducer " + what + " has no '" + marker + "' line");
  return text.substr(0, at) + with + text.substr(at + marker.size());
}

const char* const kBundleMarker = "BUNDLE = None  # kvfuzz repro";
const char* const kHarnessMarker = "import kvfuzz_repro_harness as kv  # kvfuzz repro: harness";

}  // namespace

std::string repro_script(const nlohmann::json& bundle, const std::string& template_text) {
  return replace_marker(template_text, kBundleMarker, "BUNDLE = json.loads(r\'\'\'" + bundle_lines(bundle) + "\'\'\')",
                        "template");
}

std::string repro_harness_name(const nlohmann::json& bundle) {
  return "kvfuzz_repro_" + bundle["target"].get<std::string>();
}

ReproFiles repro_files(const nlohmann::json& bundle, const std::string& harness_template,
                       const std::string& body_template, bool one_file) {
  const std::string name = repro_harness_name(bundle);
  // the harness keeps its BUNDLE global; the body sets it before it runs
  const std::string harness = replace_marker(
      harness_template, kBundleMarker, "BUNDLE = None  # set by the reproducer that imports this module", "template");
  std::string body = repro_script(bundle, body_template);
  if (one_file)
    return {"", "", harness + "\n\n" + replace_marker(body, kHarnessMarker, "kv = sys.modules[__name__]", "body")};
  return {
      name + ".py", harness,
      replace_marker(body, kHarnessMarker, "import " + name + " as kv  # kvfuzz\'s harness, beside this file", "body")};
}

std::string repro_embed(const std::string& template_text, const std::string& adapters_dir) {
  const std::string marker = "EMBEDDED = {}  # kvfuzz repro embeds:";
  const size_t at = template_text.find(marker);
  if (at == std::string::npos) return template_text;
  const size_t eol = template_text.find('\n', at);
  std::istringstream specs(template_text.substr(at + marker.size(), eol - at - marker.size()));
  std::string out = "EMBEDDED = {}  # kvfuzz's own modules this script imports, each verbatim from the file named\n";
  for (std::string spec; specs >> spec;) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      throw InvalidCase("reproducer template: '" + spec + "' in its EMBEDDED line is not NAME=PATH");
    const std::string name = spec.substr(0, eq),
                      path = (std::filesystem::path(adapters_dir) / spec.substr(eq + 1)).string();
    if (!std::filesystem::is_regular_file(path))
      throw InvalidCase("reproducer template embeds " + path + ", which does not exist");
    const std::string text = read_input(path, kMaxCaseBytes);
    if (text.find("\'\'\'") != std::string::npos || text.empty() || text.back() != '\n')
      throw InvalidCase("reproducer template embeds " + path +
                        ", which cannot sit in a raw string (it holds \'\'\' or does not end in a newline)");
    out += "# ---- adapters/" + spec.substr(eq + 1) + " of kvfuzz, as module " + name + " ----\n";
    out += "EMBEDDED[\"" + name + "\"] = r\'\'\'\n" + text + "\'\'\'\n";
  }
  return template_text.substr(0, at) + out + (eol == std::string::npos ? "" : template_text.substr(eol + 1));
}

}  // namespace kvfuzz
