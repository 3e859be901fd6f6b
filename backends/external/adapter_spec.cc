#include "backends/external/adapter_spec.h"

#include <algorithm>
#include <sstream>

#include "backends/contract/families.h"
#include "backends/contract/npy.h"

namespace kvfuzz {
namespace {

const std::set<std::string> kModes = {"idle",          "decode",          "extend",       "mixed",
                                      "target_verify", "draft_extend_v2", "draft_decode", "draft_q_only"};
const std::set<std::string> kLayerKinds = {"full", "sliding_window", "chunked"};
const std::set<std::string> kDtypes = {"fp32", "fp16", "bf16", "fp8_e4m3"};
const std::set<std::string> kPrecisionDtypes = {"cache", "fp32", "fp16", "bf16"};

template <class T>
std::string join(const std::set<T>& s) {
  std::ostringstream os;
  bool first = true;
  for (const T& x : s) {
    os << (first ? "" : ", ") << x;
    first = false;
  }
  return os.str();
}

struct Parser {
  const nlohmann::json& j;
  std::string where;

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw ContractError(where + ": '" + field + "' " + what);
  }
  std::optional<std::set<std::string>> names(const std::string& key, const std::set<std::string>& allowed) const {
    if (!j.contains(key) || j[key] == "any" || j[key] == "all") return std::nullopt;
    if (!j[key].is_array()) fail(key, "must be a list of names or \"any\"");
    std::set<std::string> out;
    for (const auto& v : j[key]) {
      if (!v.is_string() || !allowed.count(v.get<std::string>()))
        fail(key, "holds " + v.dump() + ", which is not one of " + join(allowed));
      out.insert(v.get<std::string>());
    }
    return out;
  }
  std::optional<std::set<int32_t>> ints(const std::string& key) const {
    if (!j.contains(key) || j[key] == "any") return std::nullopt;
    if (!j[key].is_array()) fail(key, "must be a list of integers or \"any\"");
    std::set<int32_t> out;
    for (const auto& v : j[key]) {
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 1 << 20)
        fail(key, "holds " + v.dump() + ", which is not a positive integer");
      out.insert(v.get<int32_t>());
    }
    return out;
  }
  bool flag(const std::string& key, bool fallback) const {
    if (!j.contains(key)) return fallback;
    if (!j[key].is_boolean()) fail(key, "must be true or false");
    return j[key].get<bool>();
  }
  std::optional<int32_t> bounded(const std::string& key, int32_t lo, int32_t hi) const {
    if (!j.contains(key)) return std::nullopt;
    if (!j[key].is_number_integer() || j[key].get<int64_t>() < lo || j[key].get<int64_t>() > hi)
      fail(key, "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return j[key].get<int32_t>();
  }
  std::string text(const std::string& key, const std::string& fallback) const {
    if (!j.contains(key)) return fallback;
    if (!j[key].is_string()) fail(key, "must be a string");
    return j[key].get<std::string>();
  }
};

}  // namespace

std::string to_string(AdapterRole r) { return r == AdapterRole::planner ? "planner" : "executor"; }

AdapterSpec parse_spec(const nlohmann::json& hello, const std::string& command) {
  const std::string where = "adapter '" + command + "'";
  AdapterSpec spec;
  spec.command = command;
  if (!hello.is_object() || !hello.contains("kvfuzz_adapter"))
    throw ContractError(where + ": its first message must be the declaration {\"kvfuzz_adapter\": 1, ...}, got " +
                        hello.dump().substr(0, 200));
  if (hello["kvfuzz_adapter"] != kContractVersion)
    throw ContractError(where + ": speaks contract version " + hello["kvfuzz_adapter"].dump() + "; this kvfuzz speaks " +
                        std::to_string(kContractVersion));
  const Parser top{hello, where};
  spec.name = top.text("name", "");
  if (spec.name.empty() || spec.name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") != std::string::npos)
    top.fail("name", "must be a non-empty name of letters, digits, '_', '-' and '.'");
  const std::string role = top.text("role", "");
  if (role != "planner" && role != "executor") top.fail("role", "must be \"planner\" or \"executor\", got \"" + role + "\"");
  spec.role = role == "planner" ? AdapterRole::planner : AdapterRole::executor;
  spec.family = top.text("family", "");
  if (!find_family(spec.family)) {
    std::string known;
    for (const Family& f : families()) known += (known.empty() ? "" : ", ") + std::string(f.name);
    top.fail("family", "is \"" + spec.family + "\", not a known family (" + known + ")");
  }
  spec.description = top.text("description", "");
  if (hello.contains("batch") && !hello["batch"].is_boolean()) top.fail("batch", "must be true or false");
  spec.batch = hello.value("batch", false);
  const nlohmann::json empty = nlohmann::json::object();
  const nlohmann::json& sup = hello.contains("supports") ? hello["supports"] : empty;
  if (!sup.is_object()) top.fail("supports", "must be an object");
  const Parser p{sup, where + " supports"};
  spec.modes = p.names("modes", kModes);
  spec.layer_kinds = p.names("layer_kinds", kLayerKinds);
  spec.dtypes = p.names("dtypes", kDtypes);
  spec.page_sizes = p.ints("page_sizes");
  spec.head_dims = p.ints("head_dims");
  spec.mla = p.flag("mla", spec.family == "mla");
  spec.non_mla = p.flag("non_mla", spec.family != "mla");
  spec.hybrid_swa = p.flag("hybrid_swa", true);
  spec.cuda_graph = p.flag("cuda_graph", true);
  spec.softcap = p.flag("softcap", true);
  spec.gqa = p.flag("gqa", true);
  spec.sinks = p.flag("sinks", false);
  spec.kv_scales = p.flag("kv_scales", false);
  const nlohmann::json& prec = hello.contains("precision") ? hello["precision"] : empty;
  const Parser q{prec, where + " precision"};
  spec.p_dtype = q.text("p_dtype", "cache");
  spec.out_dtype = q.text("out_dtype", "fp32");
  if (!kPrecisionDtypes.count(spec.p_dtype)) q.fail("p_dtype", "must be one of " + join(kPrecisionDtypes));
  spec.max_merges = q.bounded("max_merges", 0, 4096).value_or(spec.max_merges);
  spec.tile_keys = q.bounded("tile_keys", 1, 4096).value_or(spec.tile_keys);
  spec.split_keys = q.bounded("split_keys", 1, 4096).value_or(spec.split_keys);
  const std::string row_sum = q.text("row_sum", "fp32");
  if (row_sum != "fp32" && row_sum != "p") q.fail("row_sum", "must be \"fp32\" or \"p\"");
  spec.row_sum_rounded = row_sum == "p";
  const std::string products = q.text("qk_products", "fp32");
  if (products == "cache") spec.qk_products = QkProducts::cache;
  else if (products == "cache_mha") spec.qk_products = QkProducts::cache_mha;
  else if (products != "fp32") q.fail("qk_products", "must be \"fp32\", \"cache\" or \"cache_mha\"");
  if (!kPrecisionDtypes.count(spec.out_dtype)) q.fail("out_dtype", "must be one of " + join(kPrecisionDtypes));
  return spec;
}

Support AdapterSpec::supports(const Scenario& s, int32_t kernel_page_size) const {
  auto no = [&](const std::string& what) { return Support::no(name + " does not support " + what); };
  const Model& m = s.model;
  if (m.mla && !mla) return no("MLA models");
  if (!m.mla && !non_mla) return no("non-MLA models");
  if (modes && !modes->count(to_string(s.batch.mode)))
    return no("mode " + to_string(s.batch.mode) + " (supports " + join(*modes) + ")");
  if (layer_kinds) {
    for (const Layer& l : m.layers)
      if (!layer_kinds->count(to_string(l.kind))) return no(to_string(l.kind) + " layers (supports " + join(*layer_kinds) + ")");
  }
  if (dtypes && !dtypes->count(std::string(to_string(s.values.dtype))))
    return no("dtype " + std::string(to_string(s.values.dtype)) + " (supports " + join(*dtypes) + ")");
  if (page_sizes && !page_sizes->count(kernel_page_size))
    return no("kernel page size " + std::to_string(kernel_page_size) + " (supports " + join(*page_sizes) + ")");
  if (head_dims && (!head_dims->count(m.head_dim) || !head_dims->count(m.v_head_dim)))
    return no("head dims " + std::to_string(m.head_dim) + "/" + std::to_string(m.v_head_dim) + " (supports " + join(*head_dims) + ")");
  if (s.cache.swa_pages > 0 && !hybrid_swa) return no("hybrid SWA pools");
  if (s.batch.graph_bs > 0 && !cuda_graph) return no("CUDA-graph batches");
  if (m.softcap != 0 && !softcap) return no("softcap");
  if (m.q_heads != m.kv_heads && !gqa) return no("GQA");
  if (!m.sinks.empty() && !sinks) return no("attention sinks (declare supports.sinks)");
  // a planner never sees values: only an executor reads the scales
  if (role == AdapterRole::executor && !kv_scales &&
      std::any_of(m.layers.begin(), m.layers.end(), [](const Layer& l) { return l.scaled(); }))
    return no("fp8 KV-cache scales (declare supports.kv_scales)");
  return {};
}

KernelRounding answered_rounding(const nlohmann::json& precision, KernelRounding declared, const std::string& where) {
  const Parser q{precision, where + " answer's precision"};
  if (!precision.is_object()) q.fail("precision", "must be an object");
  for (const auto& [key, value] : precision.items())
    if (key != "tile_keys" && key != "split_keys" && key != "max_merges")
      q.fail(key, "cannot be answered per request (tile_keys, split_keys and max_merges can)");
  declared.tile_keys = q.bounded("tile_keys", 1, 4096).value_or(declared.tile_keys);
  declared.split_keys = q.bounded("split_keys", 1, 4096).value_or(declared.split_keys);
  declared.extra_merges = q.bounded("max_merges", 0, 4096).value_or(declared.extra_merges);
  return declared;
}

std::string AdapterSpec::support_line() const {
  std::ostringstream os;
  os << to_string(role) << " of family " << family << "; modes " << (modes ? join(*modes) : "all") << "; layers "
     << (layer_kinds ? join(*layer_kinds) : "all") << "; dtypes " << (dtypes ? join(*dtypes) : "all") << "; page sizes "
     << (page_sizes ? join(*page_sizes) : "any") << "; head dims " << (head_dims ? join(*head_dims) : "any")
     << (mla ? "; MLA" : "") << (non_mla ? "" : "; MLA only") << (hybrid_swa ? "" : "; no hybrid SWA")
     << (cuda_graph ? "" : "; no CUDA graphs") << (softcap ? "" : "; no softcap") << (gqa ? "" : "; no GQA")
     << (sinks ? "; sinks" : "") << (kv_scales ? "; kv scales" : "") << "; precision P " << p_dtype << ", output "
     << out_dtype;
  return os.str();
}

}  // namespace kvfuzz
