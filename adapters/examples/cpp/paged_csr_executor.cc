// A paged_csr executor written from scratch in C++ against kvfuzz's C ABI: FlashInfer's paged and
// ragged wrapper calls (build/adapters/libcpp_paged_csr.so).
//
//   kvfuzz run --backend cpp_paged_csr
//              --adapter "build/backends/kvfuzz-worker build/adapters/libcpp_paged_csr.so"
//
// Semantics (FAMILIES.md paged_csr, FlashInfer's paged_kv_t): layer l runs the calls of
// plan["groups"][plan["group_of_layer"][l]], arrays "groups.<g>.calls.<c>.<name>". Row r's queries
// are tokens qo_indptr[r] .. qo_indptr[r+1]. A paged call's keys are pages kv_indices[kv_indptr[r]
// .. kv_indptr[r+1]] of page_size slots, the last one holding kv_last_page_len[r] keys; a ragged
// call's keys are this step's batch tokens kv_indptr[r] .. kv_indptr[r+1] (k_new, v_new). Query i
// sits at key index last = k_len - q_len + i: keys below last - window_left are dropped
// (window_left >= 0); then custom_mask[mask_indptr[r] + i * k_len + k] decides (has_mask), else
// causal keeps k <= last. The calls of a group are merged by LSE: FlashInfer's base-2 merge_state,
// or with plan["merge"] == "natural_exp" the exp/log fallback applied to base-2 LSEs (which is
// what that fallback computes). Arithmetic: example_attention.h. KVFUZZ_EXAMPLE_BREAK: example_break.h.
#include <cmath>
#include <string>
#include <vector>

#include "adapters/examples/cpp/example_arrays.h"
#include "adapters/examples/cpp/example_attention.h"
#include "adapters/examples/cpp/example_executor.h"

namespace {

using namespace kvfuzz_example;
using nlohmann::json;

// One wrapper call of `layer` into `part`; 0 or a kvfuzz_fail code.
int run_call(const kvfuzz_call* call, const Model& m, const json& desc, const std::string& prefix, int layer, Partial& part) {
  const auto qo_indptr = array<int32_t>(call, prefix + "qo_indptr"), kv_indptr = array<int32_t>(call, prefix + "kv_indptr");
  const auto kv_indices = optional_array<int32_t>(call, prefix + "kv_indices");
  const auto last_page_len = optional_array<int32_t>(call, prefix + "kv_last_page_len");
  const auto mask = optional_array<uint8_t>(call, prefix + "custom_mask");
  const auto mask_indptr = optional_array<int32_t>(call, prefix + "mask_indptr");
  const bool ragged = desc.at("role").get<std::string>() == "ragged", causal = desc.at("causal").get<bool>();
  const bool has_mask = desc.at("has_mask").get<bool>();
  const auto rows = desc.at("rows").get<int64_t>(), ps = desc.at("page_size").get<int64_t>();
  const auto window_left = desc.at("window_left").get<int64_t>();
  std::vector<KeyRef> keys;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t q0 = qo_indptr[r], q_len = qo_indptr[r + 1] - q0;
    const int64_t kv0 = kv_indptr[r], entries = kv_indptr[r + 1] - kv0;
    if (q_len <= 0) continue;
    if (q0 < 0 || q0 + q_len > m.tokens) return kvfuzz_fail(call, "%s row %lld: queries outside the batch", prefix.c_str(), (long long)r);
    if (ragged) {
      keys.clear();
      for (int64_t k = 0; k < entries; ++k) {
        if (kv0 + k < 0 || kv0 + k >= m.tokens) return kvfuzz_fail(call, "%s row %lld: key token %lld outside the batch", prefix.c_str(), (long long)r, (long long)(kv0 + k));
        keys.push_back(batch_key(call, m, layer, kv0 + k));
      }
    } else {
      const int64_t k_len = entries <= 0 ? 0 : (entries - 1) * ps + last_page_len[r];
      if (kv0 < 0 || kv0 + std::max<int64_t>(entries, 0) > kv_indices.size)
        return kvfuzz_fail(call, "%s row %lld: pages outside kv_indices", prefix.c_str(), (long long)r);
      if (!paged_keys(call, m, layer, kv_indices.data + kv0, entries, ps, k_len, keys)) return 1;
    }
    const auto k_len = static_cast<int64_t>(keys.size());
    const int64_t mask0 = has_mask ? mask_indptr[r] : 0;
    attend(m, call, layer, q0, q_len, keys, [&](int64_t i, int64_t k) {
      const int64_t last = k_len - q_len + i;
      if (window_left >= 0 && k < last - window_left) return false;
      if (has_mask) return mask[mask0 + i * k_len + k] != 0;
      return !causal || k <= last;
    }, part);
  }
  return 0;
}

void scale_lse(Partial& p, double by) {
  for (double& l : p.lse) l *= by;
}

int run_paged_csr(const kvfuzz_call* call, const json& manifest) {
  const Model m = Model::of(manifest, call);
  const json& plan = manifest.at("plan");
  const bool natural_exp_merge = plan.at("merge").get<std::string>() == "natural_exp";
  for (int layer = 0; layer < call->num_layers; ++layer) {
    const auto g = plan.at("group_of_layer").at(static_cast<size_t>(layer)).get<size_t>();
    const json& calls = plan.at("groups").at(g).at("calls");
    Partial merged(m);
    for (size_t c = 0; c < calls.size(); ++c) {
      Partial part(m);
      if (run_call(call, m, calls[c], "groups." + std::to_string(g) + ".calls." + std::to_string(c) + ".", layer, part) != 0) return 1;
      if (natural_exp_merge && c > 0) {  // the fallback merges base-2 LSEs with exp/log
        scale_lse(merged, 1.0 / std::log(2.0));
        scale_lse(part, 1.0 / std::log(2.0));
        merged.merge(part);
        scale_lse(merged, std::log(2.0));
      } else {
        merged.merge(part);
      }
    }
    merged.write(call, layer);
  }
  return 0;
}

}  // namespace

KVFUZZ_EXPORT int kvfuzz_executor_declare(char* json, size_t capacity) {
  return declare(json, capacity, "cpp_paged_csr", "paged_csr", "C++ paged_csr executor through the C ABI (FlashInfer wrapper semantics)");
}

KVFUZZ_EXPORT int kvfuzz_executor_run(const kvfuzz_call* call) { return run(call, run_paged_csr); }
