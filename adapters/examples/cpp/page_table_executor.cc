// A page_table executor written from scratch in C++ against kvfuzz's C ABI: the example C++
// users copy (the numpy counterpart is adapters/examples/numpy_page_table.py).
//
// Where it sits: built as build/adapters/libcpp_page_table.so and run under kvfuzz-worker, which
// loads it, hands it guarded arrays and checks what it wrote:
//
//   kvfuzz run --backend cpp_page_table
//              --adapter "build/backends/kvfuzz-worker build/adapters/libcpp_page_table.so"
//
// Semantics (flash_attn_with_kvcache, FAMILIES.md page_table): layer l reads the group named by
// plan["layer_group"][l] ("full", "sliding" or "local.<i>"); each call ("part") i of the group has
// arrays "<group>.parts.<i>.{cu_seqlens_q,cache_seqlens,page_table}". Row b's queries are tokens
// cu_seqlens_q[b] .. cu_seqlens_q[b+1]; its keys k < cache_seqlens[b] live at slot
// page_table[b * width + k / ps] * ps + k % ps (ps = view_page_size). With causal or a window the
// right edge is the bottom-right diagonal, last = k_len - q_len + i; a window (window_left =
// plan["window_left"][l] >= 0) also drops keys below last - window_left. The parts of a group are
// merged by LSE. Arithmetic in double; softcap as cap * tanh(s / cap); GQA maps q head h to kv head
// h / (q_heads / kv_heads); MLA models read V as the first v_head_dim values of each K row.
//
// KVFUZZ_EXAMPLE_BREAK=<name> turns it into a broken variant the tests must catch: drop_last_key,
// next_page, lse_base2, freed_slot, segfault, hang, oob_write; declare_garbage and
// declare_unknown_family break its declaration instead.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/external/kvfuzz_executor.h"

namespace {

using nlohmann::json;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

std::string broken() {
  const char* b = std::getenv("KVFUZZ_EXAMPLE_BREAK");
  return b ? b : "";
}

struct Model {
  int64_t tokens, q_heads, kv_heads, head_dim, v_head_dim;
  bool mla;
  double sm_scale, softcap;
};

// A partial result of one layer: out [tokens, q_heads, v_head_dim], lse [tokens, q_heads].
struct Partial {
  std::vector<double> out, lse;
  explicit Partial(const Model& m)
      : out(static_cast<size_t>(m.tokens * m.q_heads * m.v_head_dim), 0.0),
        lse(static_cast<size_t>(m.tokens * m.q_heads), kNegInf) {}

  // merge_state: two results over disjoint keys, weights exp(lse_x - lse).
  void merge(const Partial& b, int64_t vd) {
    for (size_t r = 0; r < lse.size(); ++r) {
      const double la = lse[r], lb = b.lse[r];
      if (lb == kNegInf) continue;
      const double l = la == kNegInf ? lb : std::max(la, lb) + std::log1p(std::exp(-std::fabs(la - lb)));
      const double wa = la == kNegInf ? 0.0 : std::exp(la - l), wb = std::exp(lb - l);
      for (int64_t d = 0; d < vd; ++d) {
        double& o = out[r * static_cast<size_t>(vd) + static_cast<size_t>(d)];
        o = wa * o + wb * b.out[r * static_cast<size_t>(vd) + static_cast<size_t>(d)];
      }
      lse[r] = l;
    }
  }
};

// One flash_attn_with_kvcache call of one layer.
struct Call {
  const int32_t* cu_q;
  const int32_t* seqlens;
  const int32_t* table;
  int64_t table_size, rows, width, ps;
  bool causal;
};

// Attention of kernel row b into `part`; returns 0 or a kvfuzz_fail code.
int attend_row(const kvfuzz_call* call, const Model& m, const Call& c, int64_t b, int layer, int64_t window_left,
               Partial& part, const std::string& brk) {
  const int64_t q0 = c.cu_q[b], q1 = c.cu_q[b + 1];
  int64_t k_len = c.seqlens[b];
  if (q1 <= q0) return 0;
  if (q0 < 0 || q1 > m.tokens) return kvfuzz_fail(call, "layer %d row %lld: queries [%lld, %lld) outside the batch", layer, (long long)b, (long long)q0, (long long)q1);
  if (brk == "drop_last_key" && k_len > 1) --k_len;
  const kvfuzz_array& kc = call->k_cache[layer];
  const int64_t slots = kc.shape[0];
  std::vector<int64_t> slot(static_cast<size_t>(k_len));
  for (int64_t k = 0; k < k_len; ++k) {
    const int64_t at = b * c.width + k / c.ps;
    if (at < 0 || at >= c.table_size) return kvfuzz_fail(call, "layer %d row %lld key %lld: page_table index %lld outside its %lld entries", layer, (long long)b, (long long)k, (long long)at, (long long)c.table_size);
    int64_t page = c.table[at];
    if (brk == "next_page" && k / c.ps == (k_len - 1) / c.ps) ++page;
    slot[static_cast<size_t>(k)] = page * c.ps + k % c.ps;
    if (brk == "freed_slot" && k == 0) slot[0] = slots - 1;  // the pool's last slot: past every allocation
    if (slot[static_cast<size_t>(k)] < 0 || slot[static_cast<size_t>(k)] >= slots)
      return kvfuzz_fail(call, "layer %d row %lld key %lld: slot %lld outside the pool of %lld slots", layer, (long long)b, (long long)k, (long long)slot[static_cast<size_t>(k)], (long long)slots);
  }
  const float* q = static_cast<const float*>(call->q.data) + static_cast<int64_t>(layer) * m.tokens * m.q_heads * m.head_dim;
  const float* kp = static_cast<const float*>(kc.data);
  const float* vp = m.mla ? kp : static_cast<const float*>(call->v_cache[layer].data);
  const int64_t v_stride = m.mla ? m.head_dim : m.v_head_dim;  // floats per (slot, kv head) of V
  const int64_t group = m.q_heads / m.kv_heads, q_len = q1 - q0;
  const bool right_edge = c.causal || window_left >= 0;
  std::vector<double> s(static_cast<size_t>(k_len));
  for (int64_t i = 0; i < q_len; ++i) {
    const int64_t last = k_len - q_len + i;
    for (int64_t h = 0; h < m.q_heads; ++h) {
      const int64_t kvh = h / group;
      const float* qv = q + ((q0 + i) * m.q_heads + h) * m.head_dim;
      double max = kNegInf;
      for (int64_t k = 0; k < k_len; ++k) {
        const bool visible = (!right_edge || k <= last) && (window_left < 0 || k >= last - window_left);
        s[static_cast<size_t>(k)] = kNegInf;
        if (!visible) continue;
        const float* kv = kp + (slot[static_cast<size_t>(k)] * m.kv_heads + kvh) * m.head_dim;
        double dot = 0.0;
        for (int64_t d = 0; d < m.head_dim; ++d) dot += static_cast<double>(qv[d]) * kv[d];
        double logit = dot * m.sm_scale;
        if (m.softcap > 0.0) logit = m.softcap * std::tanh(logit / m.softcap);
        s[static_cast<size_t>(k)] = logit;
        max = std::max(max, logit);
      }
      if (max == kNegInf) continue;  // no visible key: out 0, lse -inf
      double* o = &part.out[static_cast<size_t>(((q0 + i) * m.q_heads + h) * m.v_head_dim)];
      double total = 0.0;
      for (int64_t k = 0; k < k_len; ++k) {
        if (s[static_cast<size_t>(k)] == kNegInf) continue;
        const double w = std::exp(s[static_cast<size_t>(k)] - max);
        const float* vv = vp + (slot[static_cast<size_t>(k)] * m.kv_heads + kvh) * v_stride;
        for (int64_t d = 0; d < m.v_head_dim; ++d) o[d] += w * vv[d];
        total += w;
      }
      for (int64_t d = 0; d < m.v_head_dim; ++d) o[d] /= total;
      part.lse[static_cast<size_t>((q0 + i) * m.q_heads + h)] = max + std::log(total);
    }
  }
  return 0;
}

// The metadata array `prefix + name`, int32, or a kvfuzz_fail.
const int32_t* array_i32(const kvfuzz_call* call, const std::string& name, int64_t* count) {
  const int32_t* a = kvfuzz_find_i32(call, name.c_str(), count);
  if (!a) kvfuzz_fail(call, "no int32 metadata array '%s'", name.c_str());
  return a;
}

int run_layer(const kvfuzz_call* call, const json& plan, const Model& m, int layer, const std::string& brk) {
  const std::string group_name = plan.at("layer_group").at(static_cast<size_t>(layer)).get<std::string>();
  const json& group = group_name.rfind("local.", 0) == 0 ? plan.at("local").at(std::stoul(group_name.substr(6))) : plan.at(group_name);
  const int64_t window_left = plan.at("window_left").at(static_cast<size_t>(layer)).get<int64_t>();
  Partial merged(m);
  const json& parts = group.at("parts");
  for (size_t p = 0; p < parts.size(); ++p) {
    const std::string prefix = group_name + ".parts." + std::to_string(p) + ".";
    Call c{};
    int64_t n_cu = 0, n_seq = 0;
    if (!(c.cu_q = array_i32(call, prefix + "cu_seqlens_q", &n_cu)) || !(c.seqlens = array_i32(call, prefix + "cache_seqlens", &n_seq)) ||
        !(c.table = array_i32(call, prefix + "page_table", &c.table_size)))
      return 1;
    c.rows = parts[p].at("rows").get<int64_t>();
    c.width = parts[p].at("width").get<int64_t>();
    c.ps = parts[p].at("view_page_size").get<int64_t>();
    c.causal = parts[p].at("causal").get<bool>();
    if (c.rows + 1 > n_cu || c.rows > n_seq || c.ps < 1)
      return kvfuzz_fail(call, "%s: %lld rows, but cu_seqlens_q has %lld entries and cache_seqlens %lld, page size %lld", prefix.c_str(), (long long)c.rows, (long long)n_cu, (long long)n_seq, (long long)c.ps);
    Partial part(m);
    for (int64_t b = 0; b < c.rows; ++b)
      if (attend_row(call, m, c, b, layer, window_left, part, brk) != 0) return 1;
    if (p == 0) merged = std::move(part);
    else merged.merge(part, m.v_head_dim);
  }
  const size_t o_at = static_cast<size_t>(layer) * merged.out.size(), l_at = static_cast<size_t>(layer) * merged.lse.size();
  const double lse_scale = brk == "lse_base2" ? 1.0 / std::log(2.0) : 1.0;
  for (size_t i = 0; i < merged.out.size(); ++i) call->out[o_at + i] = static_cast<float>(merged.out[i]);
  for (size_t i = 0; i < merged.lse.size(); ++i) call->lse[l_at + i] = static_cast<float>(merged.lse[i] * lse_scale);
  return 0;
}

}  // namespace

KVFUZZ_EXPORT int kvfuzz_executor_declare(char* out, size_t capacity) {
  json d = {{"kvfuzz_adapter", 1},
                  {"name", "cpp_page_table"},
                  {"role", "executor"},
                  {"family", "page_table"},
                  {"description", "C++ page_table executor through the C ABI (flash_attn_with_kvcache semantics)"},
                  {"supports", {{"modes", "all"}, {"dtypes", {"fp32", "fp16", "bf16"}}, {"page_sizes", "any"}, {"mla", true}, {"non_mla", true}}},
                  {"precision", {{"p_dtype", "fp32"}, {"out_dtype", "fp32"}}}};
  if (broken() == "declare_unknown_family") d["family"] = "no_such_family";
  const std::string s = broken() == "declare_garbage" ? "cpp_page_table, page_table" : d.dump();
  if (s.size() + 1 > capacity) return 1;
  std::memcpy(out, s.c_str(), s.size() + 1);
  return 0;
}

KVFUZZ_EXPORT int kvfuzz_executor_run(const kvfuzz_call* call) {
  if (call->version != KVFUZZ_EXECUTOR_VERSION) return kvfuzz_fail(call, "built for kvfuzz_call version %d, got %d", KVFUZZ_EXECUTOR_VERSION, call->version);
  const std::string brk = broken();
  if (brk == "segfault") {
    int* volatile nowhere = nullptr;
    *nowhere = 1;  // a real write through a null pointer
  }
  if (brk == "hang") sleep(3600);
  try {
    const json manifest = json::parse(call->manifest_json);
    const json& mj = manifest.at("case").at("model");
    const Model m{call->out_shape[1],
                  mj.at("q_heads").get<int64_t>(),
                  mj.at("kv_heads").get<int64_t>(),
                  mj.at("head_dim").get<int64_t>(),
                  mj.at("v_head_dim").get<int64_t>(),
                  mj.at("mla").get<bool>(),
                  mj.at("sm_scale").get<double>(),
                  mj.at("softcap").get<double>()};
    const json& plan = manifest.at("plan");
    for (int layer = 0; layer < call->num_layers; ++layer)
      if (run_layer(call, plan, m, layer, brk) != 0) return 1;
  } catch (const std::exception& e) {
    return kvfuzz_fail(call, "cpp_page_table: %s", e.what());
  }
  if (brk == "oob_write") {
    const size_t n = call->out_bytes / sizeof(float);
    for (size_t i = 0; i < 16; ++i) call->out[n + i] = 0.0f;  // 64 bytes past the end of out
  }
  return 0;
}
