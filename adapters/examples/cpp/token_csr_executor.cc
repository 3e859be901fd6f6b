// A token_csr executor written from scratch in C++ against kvfuzz's C ABI: sglang's Triton decode
// and extend kernels (build/adapters/libcpp_token_csr.so).
//
//   kvfuzz run --backend cpp_token_csr
//              --adapter "build/backends/kvfuzz-worker build/adapters/libcpp_token_csr.so"
//
// Semantics (FAMILIES.md token_csr): layer l reads CSR c = plan["layer_csr"][l], arrays
// "csrs.<c>.{kv_indptr,kv_indices,kv_offsets,num_kv_splits}", kv_indices being token slots of the
// layer's pool (int64). plan["kernel"]:
//   decode: kernel row r is query token r over keys kv_indices[kv_indptr[r] .. kv_indptr[r+1]],
//           all visible, in splits 0 .. max_kv_splits - 1 of ceil(ceil(len / n) / 32) * 32 keys
//           (n = max(1, num_kv_splits[r])), merged by LSE (a split past the keys is empty);
//   extend: request i's queries qo_indptr[i] .. qo_indptr[i+1] read its prefix (the CSR row, key
//           positions kv_offsets[i] + k) and then the new tokens of the batch (positions from
//           "positions"), the new ones causally or by custom_mask[mask_indptr[i] + m * (prefix +
//           q_len + offset) + offset + prefix + n]; sliding_window CSRs keep pos_q - pos_k <=
//           radius, chunked ones pos_k >= pos_q / radius * radius; one softmax over both;
//   none:   nothing runs; out 0, lse -inf.
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

struct Csr {
  Span<int32_t> indptr, offsets, splits;
  Span<int64_t> indices;
  std::string kind;
  int64_t radius;

  Csr(const kvfuzz_call* call, const json& desc, const std::string& prefix)
      : indptr(array<int32_t>(call, prefix + "kv_indptr")),
        offsets(array<int32_t>(call, prefix + "kv_offsets")),
        splits(array<int32_t>(call, prefix + "num_kv_splits")),
        indices(array<int64_t>(call, prefix + "kv_indices")),
        kind(desc.at("kind").get<std::string>()),
        radius(desc.at("window_or_chunk").get<int64_t>()) {}

  // The pool keys of row r (the break variants apply); false with call->error written.
  bool keys(const kvfuzz_call* call, const Model& m, int layer, int64_t r, std::vector<KeyRef>& out) const {
    const int64_t start = indptr[r], len = std::max<int64_t>(0, indptr[r + 1] - start);
    if (start < 0 || start + len > indices.size) {
      kvfuzz_fail(call, "layer %d row %lld: keys outside kv_indices", layer, (long long)r);
      return false;
    }
    return paged_keys(call, m, layer, indices.data + start, len, 1, len, out);
  }
};

void run_decode(const kvfuzz_call* call, const Model& m, const json& plan, const Csr& csr, int layer, Partial& result) {
  const auto rows = plan.at("rows").get<int64_t>(), max_splits = plan.at("max_kv_splits").get<int64_t>();
  std::vector<KeyRef> keys, split;
  for (int64_t r = 0; r < rows; ++r) {
    if (r >= m.tokens) throw std::runtime_error("decode row " + std::to_string(r) + " has no query token");
    if (!csr.keys(call, m, layer, r, keys)) throw std::runtime_error(call->error);
    const int64_t kv_len = csr.indptr[r + 1] - csr.indptr[r], n = std::max<int64_t>(1, csr.splits[r]);
    const int64_t per = (kv_len + n - 1) / n, chunk = (per + 31) / 32 * 32;  // decode_attention.py MIN_BLOCK_KV
    for (int64_t s = 0; s < max_splits; ++s) {
      const int64_t begin = chunk * s, end = std::min<int64_t>(begin + chunk, static_cast<int64_t>(keys.size()));
      if (end <= begin) continue;
      split.assign(keys.begin() + begin, keys.begin() + end);
      attend(m, call, layer, r, 1, split, [](int64_t, int64_t) { return true; }, result);  // merged by LSE
    }
  }
}

void run_extend(const kvfuzz_call* call, const Model& m, const json& plan, const Csr& csr, int layer, Partial& result) {
  const auto qo_indptr = array<int32_t>(call, "qo_indptr"), positions = array<int32_t>(call, "positions");
  const bool use_mask = plan.at("use_custom_mask").get<bool>();
  const auto mask = optional_array<uint8_t>(call, "custom_mask");
  const auto mask_indptr = optional_array<int64_t>(call, "mask_indptr");
  std::vector<KeyRef> keys;
  for (int64_t i = 0; i < plan.at("padded_bs").get<int64_t>(); ++i) {
    const int64_t q0 = qo_indptr[i], q_len = qo_indptr[i + 1] - q0;
    if (q_len <= 0) continue;
    if (q0 < 0 || q0 + q_len > m.tokens) throw std::runtime_error("request " + std::to_string(i) + ": queries outside the batch");
    const int64_t prefix = std::max<int64_t>(0, csr.indptr[i + 1] - csr.indptr[i]), offset = csr.offsets[i];
    if (!csr.keys(call, m, layer, i, keys)) throw std::runtime_error(call->error);
    const auto read_prefix = static_cast<int64_t>(keys.size());
    for (int64_t n = 0; n < q_len; ++n) keys.push_back(batch_key(call, m, layer, q0 + n));
    const int64_t mask0 = use_mask ? mask_indptr[i] : 0, stride = prefix + q_len + offset;
    attend(m, call, layer, q0, q_len, keys, [&](int64_t q, int64_t k) {
      int64_t pos_k;
      if (k < read_prefix) {
        pos_k = offset + k;
      } else {
        const int64_t n = k - read_prefix;
        if (!(use_mask ? mask[mask0 + q * stride + offset + prefix + n] != 0 : n <= q)) return false;
        pos_k = positions[q0 + n];
      }
      const int64_t pos_q = positions[q0 + q];
      if (csr.kind == "sliding_window") return pos_q - pos_k <= csr.radius;
      if (csr.kind == "chunked") return pos_k >= pos_q / csr.radius * csr.radius;
      return true;
    }, result);
  }
}

int run_token_csr(const kvfuzz_call* call, const json& manifest) {
  const Model m = Model::of(manifest, call);
  const json& plan = manifest.at("plan");
  const auto kernel = plan.at("kernel").get<std::string>();
  for (int layer = 0; layer < call->num_layers; ++layer) {
    const auto c = plan.at("layer_csr").at(static_cast<size_t>(layer)).get<size_t>();
    const Csr csr(call, plan.at("csrs").at(c), "csrs." + std::to_string(c) + ".");
    Partial result(m);
    if (kernel == "decode") run_decode(call, m, plan, csr, layer, result);
    else if (kernel == "extend") run_extend(call, m, plan, csr, layer, result);
    result.write(call, layer);
  }
  return 0;
}

}  // namespace

KVFUZZ_EXPORT int kvfuzz_executor_declare(char* json, size_t capacity) {
  return declare(json, capacity, "cpp_token_csr", "token_csr", "C++ token_csr executor through the C ABI (sglang Triton kernels)");
}

KVFUZZ_EXPORT int kvfuzz_executor_run(const kvfuzz_call* call) { return run(call, run_token_csr); }
