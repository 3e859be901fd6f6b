// The Triton Backend object: wires the planner (triton_planner.h) and the executor
// (triton_executor.h) behind the Backend contract; run() writes each layer's new K/V first.
#include "backends/triton/triton_backend.h"

#include "backends/attend.h"
#include "backends/kv_store.h"
#include "backends/triton/triton_executor.h"
#include "backends/triton/triton_planner.h"

namespace kvfuzz {
namespace {

class TritonBackend final : public Backend {
 public:
  std::string_view name() const override { return "triton"; }
  std::string_view family() const override { return "token_csr"; }

  std::string_view summary() const override {
    return "sglang TritonAttnBackend: token CSR (kv_indptr / int64 kv_indices of req_to_token slots). Decode "
           "and draft decode (topk >= 1, one row per branch) run split-KV (num_kv_splits per row: static = the "
           "scenario's kv_splits, or sglang's adaptive get_num_kv_splits_triton for device_sms SMs over the padded "
           "batch's lengths; chunks of ceil32(ceil(kv_len / splits))) merged by LSE; extend, mixed, "
           "target_verify (tree custom mask, prefix columns skipped) and draft_extend_v2 read a prefix-only "
           "CSR plus the new tokens' k/v in one softmax. Sliding-window layers read window_kv_* CSRs (W + 1 "
           "decode keys, SWA-translated token slots) and an in-kernel window mask; chunked layers a "
           "window-style CSR from the chunk start (no production path). CUDA-graph buffers sized "
           "max_num_tokens * max_context_len. Attention sinks join each row once: in the decode kernel's "
           "stage 2 after the splits merge, in the extend kernel after the row's last key.";
  }

  Support supports(const Scenario&) const override { return {}; }

  std::vector<FaultInfo> faults() const override { return triton_fault_list(); }

  std::unique_ptr<Plan> plan(const PlanInput& in) const override { return plan_triton(in); }

  void run(const Plan& plan, const RunInput& in, RunOutput& out) const override {
    const auto& p = dynamic_cast<const TritonPlan&>(plan);
    const std::vector<int64_t> locs = step_cache_locs(in.batch);
    for (int32_t layer = 0; layer < static_cast<int32_t>(in.scenario.model.layers.size()); ++layer) {
      store_new_kv(layer, locs, in);  // set_kv_buffer before the kernel
      LayerContext ctx(in, layer, out);
      run_triton_layer(p, ctx);
    }
  }
};

}  // namespace

const Backend& triton_backend() {
  static const TritonBackend backend;
  return backend;
}

}  // namespace kvfuzz
