// What an adapter says about itself in its first message: its name, whether it plans or executes,
// its metadata family, what it supports and the precision of its kernel (PROTOCOL.md).
//
// Where it sits: parsed once when an adapter starts (worker_pool.h); pair backends ask it whether
// a case is supported before sending one. A malformed declaration is bad input: ContractError
// naming the adapter and the field.
//
//   AdapterSpec spec = parse_spec(hello_json, "python3 my_adapter.py");
//   Support s = spec.supports(scenario, /*kernel_page_size=*/1);
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "backends/backend.h"

namespace kvfuzz {

enum class AdapterRole : uint8_t { planner, executor };

struct AdapterSpec {
  std::string command;
  std::string name;
  AdapterRole role = AdapterRole::executor;
  std::string family;
  std::string description;
  // Supported sets; nullopt = any.
  std::optional<std::set<std::string>> modes, layer_kinds, dtypes;
  std::optional<std::set<int32_t>> page_sizes, head_dims;
  bool mla = false, non_mla = true, hybrid_swa = true, cuda_graph = true, softcap = true, gqa = true;
  bool sinks =
      false;  // attention sinks (Model::sinks): off unless declared, as a kernel without them would ignore them
  bool kv_scales = false;  // fp8 caches with per-tensor scales (Layer::k_scale): off unless declared, as
                           // an executor that ignored them would read the stored values unscaled
  // The kernel's precision: P rounded to `p_dtype` before P.V, the output rounded to `out_dtype`
  // ("cache" for either: the case's dtype; properties/tolerance.h).
  std::string p_dtype = "cache", out_dtype = "fp32";
  int32_t max_merges = 64;  // LSE merges of its own (split-KV, cascades) the bound must allow
  bool row_sum_rounded = false;  // "row_sum": "p": the softmax row sum adds P as rounded to p_dtype
  QkProducts qk_products = QkProducts::fp32;  // "qk_products": "fp32" | "cache" | "cache_mha" (backend.h)
  int32_t tile_keys = 1;  // fewest keys a softmax running-max update covers (1 assumes nothing)
  int32_t split_keys = 0;  // fewest keys of a split-KV partition: a merge per split_keys keys (0: none)
  // "batch": true: the executor may be handed several independent cases of one shape as one case
  // (their rows concatenated, their slots offset into one pool): it reads only what the metadata says.
  bool batch = false;

  Support supports(const Scenario& s, int32_t kernel_page_size) const;
  // One line for `kvfuzz backends`.
  std::string support_line() const;
};

// Throws ContractError naming the command and the field.
AdapterSpec parse_spec(const nlohmann::json& hello, const std::string& command);

// An executor's answer may carry "precision": {"tile_keys", "split_keys", "max_merges"}, what its
// kernel chose for this case (PROTOCOL.md); they replace the declared ones in `declared`. Throws
// ContractError naming the field.
KernelRounding answered_rounding(const nlohmann::json& precision, KernelRounding declared, const std::string& where);

std::string to_string(AdapterRole r);

}  // namespace kvfuzz
