// An mla executor written from scratch in C++ against kvfuzz's C ABI: FlashMLA-style latent decode
// and the gathered prefill (build/adapters/libcpp_mla.so).
//
//   kvfuzz run --backend cpp_mla --adapter "build/backends/kvfuzz-worker build/adapters/libcpp_mla.so"
//
// Semantics (FAMILIES.md mla). Layer l reads the pool plan["layer_pools"][l] ("full" or "swa");
// its window or chunk is a mask on positions: a query at position P keeps keys at positions
// >= P - window (sliding_window), >= P / chunk * chunk (chunked), all (full); P = positions[token].
//   latent_decode (plan["decode"], arrays "decode.*"): kernel row r reads keys k < cache_seqlens[s]
//     at block_table[(step * row_capacity + r) * width + k / ps] * ps + k % ps (swa_block_table
//     for SWA layers), s = step * row_capacity + r, ps = plan["page_size"]; key k sits at position
//     k, except that with tree_mask the row's last q_len keys are its drafts, at the positions of
//     its query tokens; query i keeps custom_mask[mask_indptr[r] + i * k_len + k] (tree_mask) or
//     k <= k_len - q_len + i. The num_splits chunks of FlashMLA cover the keys and merge by LSE
//     into the same softmax, computed here in one pass.
//   prefill (plan["prefill"], arrays "prefill.*"): the gather puts pool slot kv_indices[e]
//     (swa_kv_indices for SWA layers) at linear entry e; row r's queries qo_indptr[r] ..
//     qo_indptr[r+1] read keys k < kv_lens[r] at linear entry linear_kv_indices[linear_kv_indptr[r]
//     + k / block_size] * block_size + k % block_size, at position k, causally.
// Arithmetic: example_attention.h. KVFUZZ_EXAMPLE_BREAK: example_break.h.
#include <algorithm>
#include <string>
#include <vector>

#include "adapters/examples/cpp/example_arrays.h"
#include "adapters/examples/cpp/example_attention.h"
#include "adapters/examples/cpp/example_executor.h"

namespace {

using namespace kvfuzz_example;
using nlohmann::json;

// Lowest key position each query of a row keeps under its layer's window or chunk.
std::vector<int64_t> lowest_positions(const json& layer, const Span<int32_t>& positions, int64_t q0, int64_t q_len) {
  const auto kind = layer.at("kind").get<std::string>();
  std::vector<int64_t> lowest(static_cast<size_t>(q_len), 0);
  for (int64_t i = 0; i < q_len; ++i) {
    const int64_t p = positions[q0 + i];
    if (kind == "sliding_window") lowest[static_cast<size_t>(i)] = std::max<int64_t>(0, p - layer.at("window").get<int64_t>());
    if (kind == "chunked") lowest[static_cast<size_t>(i)] = p / layer.at("chunk").get<int64_t>() * layer.at("chunk").get<int64_t>();
  }
  return lowest;
}

void run_decode(const kvfuzz_call* call, const Model& m, const json& plan, int layer, const json& layer_desc, bool swa, Partial& part) {
  const json& d = plan.at("decode");
  const auto positions = array<int32_t>(call, "positions"), cu_q = array<int32_t>(call, "decode.cu_seqlens_q");
  const auto table = array<int32_t>(call, swa ? "decode.swa_block_table" : "decode.block_table");
  const auto seqlens = array<int32_t>(call, "decode.cache_seqlens");
  const auto mask = optional_array<uint8_t>(call, "decode.custom_mask");
  const auto mask_indptr = optional_array<int64_t>(call, "decode.mask_indptr");
  const auto rows = d.at("rows").get<int64_t>(), width = d.at("width").get<int64_t>();
  const int64_t base = d.at("step").get<int64_t>() * d.at("row_capacity").get<int64_t>();
  const bool tree = d.at("tree_mask").get<bool>();
  const auto ps = plan.at("page_size").get<int64_t>();
  std::vector<KeyRef> keys;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t q0 = cu_q[r], q_len = cu_q[r + 1] - q0;
    if (q_len <= 0) continue;
    if (q0 < 0 || q0 + q_len > m.tokens) throw std::runtime_error("decode row " + std::to_string(r) + ": queries outside the batch");
    const int64_t row = (base + r) * width;
    if (row < 0 || row + width > table.size) throw std::runtime_error("decode row " + std::to_string(r) + ": outside the block table");
    if (!paged_keys(call, m, layer, table.data + row, width, ps, seqlens[base + r], keys)) throw std::runtime_error(call->error);
    const auto k_len = static_cast<int64_t>(keys.size());
    const int64_t mask_row = tree ? mask_indptr[r] : 0, drafts_from = k_len - q_len;
    const std::vector<int64_t> lowest = lowest_positions(layer_desc, positions, q0, q_len);
    attend(m, call, layer, q0, q_len, keys, [&](int64_t i, int64_t k) {
      const bool structural = tree ? mask[mask_row + i * k_len + k] != 0 : k <= k_len - q_len + i;
      const int64_t position = tree && k >= drafts_from ? positions[q0 + k - drafts_from] : k;
      return structural && position >= lowest[static_cast<size_t>(i)];
    }, part);
  }
}

void run_prefill(const kvfuzz_call* call, const Model& m, const json& plan, int layer, const json& layer_desc, bool swa, Partial& part) {
  const auto positions = array<int32_t>(call, "positions"), qo_indptr = array<int32_t>(call, "prefill.qo_indptr");
  const auto kv_lens = array<int32_t>(call, "prefill.kv_lens"), kv_indptr = array<int32_t>(call, "prefill.kv_indptr");
  const auto gathered = array<int32_t>(call, swa ? "prefill.swa_kv_indices" : "prefill.kv_indices");
  const auto linear_indptr = array<int32_t>(call, "prefill.linear_kv_indptr");
  const auto linear_indices = array<int32_t>(call, "prefill.linear_kv_indices");
  const auto block = plan.at("prefill").at("block_size").get<int64_t>();
  const int64_t total = kv_indptr[kv_lens.size];  // entries the gather filled
  std::vector<int64_t> slots;
  std::vector<KeyRef> keys;
  for (int64_t r = 0; r < kv_lens.size; ++r) {
    const int64_t q0 = qo_indptr[r], q_len = qo_indptr[r + 1] - q0;
    if (q_len <= 0) continue;
    if (q0 < 0 || q0 + q_len > m.tokens) throw std::runtime_error("prefill row " + std::to_string(r) + ": queries outside the batch");
    slots.clear();
    for (int64_t k = 0; k < kv_lens[r]; ++k) {
      const int64_t entry = int64_t{linear_indices[linear_indptr[r] + k / block]} * block + k % block;
      if (entry < 0 || entry >= total) throw std::runtime_error("prefill row " + std::to_string(r) + ": linear entry outside the gather");
      slots.push_back(gathered[entry]);
    }
    if (!paged_keys(call, m, layer, slots.data(), static_cast<int64_t>(slots.size()), 1, static_cast<int64_t>(slots.size()), keys))
      throw std::runtime_error(call->error);
    const auto k_len = static_cast<int64_t>(keys.size());
    const std::vector<int64_t> lowest = lowest_positions(layer_desc, positions, q0, q_len);
    attend(m, call, layer, q0, q_len, keys, [&](int64_t i, int64_t k) {
      return k <= k_len - q_len + i && k >= lowest[static_cast<size_t>(i)];
    }, part);
  }
}

int run_mla(const kvfuzz_call* call, const json& manifest) {
  const Model m = Model::of(manifest, call);
  const json& plan = manifest.at("plan");
  const bool decode = plan.at("path").get<std::string>() == "latent_decode";
  for (int layer = 0; layer < call->num_layers; ++layer) {
    const json& layer_desc = manifest.at("case").at("model").at("layers").at(static_cast<size_t>(layer));
    const bool swa = plan.at("layer_pools").at(static_cast<size_t>(layer)).get<std::string>() == "swa";
    Partial part(m);
    if (decode) run_decode(call, m, plan, layer, layer_desc, swa, part);
    else run_prefill(call, m, plan, layer, layer_desc, swa, part);
    part.write(call, layer);
  }
  return 0;
}

}  // namespace

KVFUZZ_EXPORT int kvfuzz_executor_declare(char* json, size_t capacity) {
  return declare(json, capacity, "cpp_mla", "mla", "C++ mla executor through the C ABI (FlashMLA decode, gathered prefill)");
}

KVFUZZ_EXPORT int kvfuzz_executor_run(const kvfuzz_call* call) { return run(call, run_mla); }
