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
// plan["layer_group"][l] ("full", "sliding" or "local.<i>"); each call ("part") p of the group has
// arrays "<group>.parts.<p>.{cu_seqlens_q,cache_seqlens,page_table}". Row b's queries are tokens
// cu_seqlens_q[b] .. cu_seqlens_q[b+1]; its keys k < cache_seqlens[b] live at slot
// page_table[b * width + k / ps] * ps + k % ps (ps = view_page_size). With causal or a window the
// right edge is the bottom-right diagonal, last = k_len - q_len + i; a window (window_left =
// plan["window_left"][l] >= 0) also drops keys below last - window_left. The parts of a group are
// merged by LSE. Arithmetic: example_attention.h. KVFUZZ_EXAMPLE_BREAK: example_break.h.
#include <string>
#include <vector>

#include "adapters/examples/cpp/example_arrays.h"
#include "adapters/examples/cpp/example_attention.h"
#include "adapters/examples/cpp/example_executor.h"

namespace {

using namespace kvfuzz_example;
using nlohmann::json;

// One flash_attn_with_kvcache call of `layer` into `part`; 0 or a kvfuzz_fail code.
int run_call(const kvfuzz_call* call, const Model& m, const json& desc, const std::string& prefix, int layer,
             int64_t window_left, Partial& part) {
  const auto cu_q = array<int32_t>(call, prefix + "cu_seqlens_q"), seqlens = array<int32_t>(call, prefix + "cache_seqlens");
  const auto table = array<int32_t>(call, prefix + "page_table");
  const auto rows = desc.at("rows").get<int64_t>(), width = desc.at("width").get<int64_t>();
  const auto ps = desc.at("view_page_size").get<int64_t>();
  const bool right_edge = desc.at("causal").get<bool>() || window_left >= 0;
  if (ps < 1 || rows * width > table.size)
    return kvfuzz_fail(call, "%s: %lld rows of width %lld do not fit its arrays", prefix.c_str(), (long long)rows, (long long)width);
  std::vector<KeyRef> keys;
  for (int64_t b = 0; b < rows; ++b) {
    const int64_t q0 = cu_q[b], q_len = cu_q[b + 1] - q0;
    if (q_len <= 0) continue;
    if (q0 < 0 || q0 + q_len > m.tokens) return kvfuzz_fail(call, "%s row %lld: queries outside the batch", prefix.c_str(), (long long)b);
    if (!paged_keys(call, m, layer, table.data + b * width, width, ps, seqlens[b], keys)) return 1;
    const auto k_len = static_cast<int64_t>(keys.size());
    attend(m, call, layer, q0, q_len, keys, [&](int64_t i, int64_t k) {
      const int64_t last = k_len - q_len + i;
      return (!right_edge || k <= last) && (window_left < 0 || k >= last - window_left);
    }, part);
  }
  return 0;
}

int run_page_table(const kvfuzz_call* call, const json& manifest) {
  const Model m = Model::of(manifest, call);
  const json& plan = manifest.at("plan");
  for (int layer = 0; layer < call->num_layers; ++layer) {
    const auto name = plan.at("layer_group").at(static_cast<size_t>(layer)).get<std::string>();
    const json& group = name.rfind("local.", 0) == 0 ? plan.at("local").at(std::stoul(name.substr(6))) : plan.at(name);
    const auto window_left = plan.at("window_left").at(static_cast<size_t>(layer)).get<int64_t>();
    Partial merged(m);
    const json& parts = group.at("parts");
    for (size_t p = 0; p < parts.size(); ++p) {
      Partial part(m);
      if (run_call(call, m, parts[p], name + ".parts." + std::to_string(p) + ".", layer, window_left, part) != 0) return 1;
      merged.merge(part);
    }
    merged.write(call, layer);
  }
  return 0;
}

}  // namespace

KVFUZZ_EXPORT int kvfuzz_executor_declare(char* json, size_t capacity) {
  return declare(json, capacity, "cpp_page_table", "page_table",
                 "C++ page_table executor through the C ABI (flash_attn_with_kvcache semantics)");
}

KVFUZZ_EXPORT int kvfuzz_executor_run(const kvfuzz_call* call) { return run(call, run_page_table); }
