// fp8 descales as a planner recorded them: what each kernel call of a layer multiplies the cache's
// stored values by (vLLM's --kv-cache-dtype fp8: FlashAttention's q/k/v_descale, FlashInfer's
// run(q_scale, k_scale, v_scale)), carried by a plan per layer and consumed by the executors.
//
// Where it sits: an external planner's plan (FAMILIES.md `descales`; page_table and paged_csr) ->
// **LayerDescales** -> the family's executor hands attend_row each kernel row's RowDescale
// (attend.h), and its check_metadata holds them against the layer's scales (check_descales).
//
//   const CallDescales* d = descales_of(plan.descales, layer, part);   // nullptr: none recorded
//   RowDescale r = row_descale(*d, call_name, rows, b, kv_heads, layer);
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kvfuzz {

class MetadataChecker;

// One call's descales, float32 values [rows][kv_heads] flattened (q empty: none, 1). A kernel that
// takes one scalar (FlashInfer) has it repeated over its rows and heads.
struct CallDescales {
  std::vector<double> q, k, v;
};
// One layer's: an entry per call of the layer's group, in order (layers of a group share their
// calls, not their scales).
struct LayerDescales {
  std::vector<CallDescales> parts;
};

// The fp8 descales one kernel row was handed: the kernel attends with stored values times them.
// The pool holds stored * the layer's scale (kv_pools.h), so a read is row / scale * descale:
// exactly the row where the descale is the layer's scale. Each span [kv_heads]; q empty: 1.
struct RowDescale {
  std::span<const double> q, k, v;
};

// Part `part` of layer's descales, or nullptr where the plan has none; a Violation where the plan
// has descales but none for this call.
const CallDescales* descales_of(const std::vector<LayerDescales>& descales, int32_t layer, size_t part);

// Kernel row b's slice; a Violation where the call's descales are not [rows][kv_heads].
RowDescale row_descale(const CallDescales& d, const std::string& call, int32_t rows, int32_t b, int32_t kv_heads,
                       int32_t layer);

// The metadata check: every call of the layer (its name and rows, in order) handed the layer's
// own k_scale / v_scale at every row and head, and q 1 or none.
struct CallShape {
  std::string name;
  int32_t rows = 0;
};
void check_descales(MetadataChecker& check, const std::vector<LayerDescales>& descales, int32_t layer,
                    const std::vector<CallShape>& calls);

}  // namespace kvfuzz
