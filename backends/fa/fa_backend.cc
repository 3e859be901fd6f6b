// The fa Backend object: names, support matrix, faults; planning and running are delegated to
// fa_planner.cc and fa_executor.cc. See fa_backend.h.
#include "backends/fa/fa_backend.h"

#include "backends/fa/fa_executor.h"
#include "backends/fa/fa_faults.h"
#include "backends/fa/fa_planner.h"

namespace kvfuzz {
namespace {

class FaBackend : public Backend {
 public:
  std::string_view name() const override { return "fa"; }
  std::string_view family() const override { return "page_table"; }

  std::string_view summary() const override {
    return "sglang FlashAttentionBackend + flash_attn_with_kvcache: page table = req_to_token strided then divided, "
           "cache_seqlens per mode; all modes (decode, extend, mixed, target_verify chains and topk>1 trees as "
           "main+expand cascades, draft_extend_v2, draft decode topk>=1 with per-branch partial-page copies, idle); "
           "full, sliding-window (SWA pool: translate slot, then divide; exact windows on prefix++drafts rows in "
           "spec trees) and chunked layers (make_local_attention_virtual_batches); GQA, MLA, softcap, attention "
           "sinks (s_aux on the first call of each merged group); CUDA-graph capture-size buffers filled by replay";
  }

  Support supports(const Scenario& s) const override {
    for (const Layer& l : s.model.layers) {
      if (l.kind == LayerKind::chunked && (l.chunk <= 0 || l.chunk % s.cache.page_size != 0))
        return Support::no("local attention needs the chunk to be a multiple of the page size (production asserts it)");
    }
    return {};
  }

  std::vector<FaultInfo> faults() const override { return fa::fault_list(); }

  std::unique_ptr<Plan> plan(const PlanInput& in) const override { return fa::plan_fa(in); }

  void run(const Plan& plan, const RunInput& in, RunOutput& out) const override {
    fa::run_fa(static_cast<const fa::FaPlan&>(plan), in, out);
  }
};

}  // namespace

const Backend& fa_backend() {
  static const FaBackend backend;
  return backend;
}

}  // namespace kvfuzz
