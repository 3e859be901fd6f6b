// The mla Backend: support matrix, faults, and the plan/run dispatch.
//
// Where it sits: registry -> **mla_backend()** -> plan_mla (mla_planner.h) / run_mla (mla_executor.h).
#include "backends/mla/mla_backend.h"

#include "backends/common/planned_modes.h"
#include "backends/mla/mla_executor.h"
#include "backends/mla/mla_faults.h"
#include "backends/mla/mla_planner.h"

namespace kvfuzz {
namespace mla {

std::unique_ptr<MlaPlan> plan_mla(const PlanInput& in) {
  refuse_unplanned_mode(in.batch, "mla");
  auto plan = std::make_unique<MlaPlan>();
  const ForwardBatch& fb = in.batch;
  plan->page_size = fb.page_size;
  plan->hybrid = in.cache.hybrid;
  for (int32_t l = 0; l < static_cast<int32_t>(in.scenario.model.layers.size()); ++l)
    plan->layer_pools.push_back(pool_of(in.scenario, l));
  plan->positions = Buffer<int32_t>("positions", fb.num_tokens());
  for (int64_t t = 0; t < fb.num_tokens(); ++t) plan->positions.set(t, fb.positions[static_cast<size_t>(t)]);

  // Every buffer exists (empty when the path does not use it), so guards can always be checked.
  LatentDecodeMeta& d = plan->decode;
  d.block_table = Buffer<int32_t>("block_table", 0);
  d.swa_block_table = Buffer<int32_t>("swa_block_table", 0);
  d.cache_seqlens = Buffer<int32_t>("cache_seqlens", 0);
  d.cu_seqlens_q = Buffer<int32_t>("cu_seqlens_q", 0);
  d.mask_indptr = Buffer<int64_t>("mask_indptr", 0);
  d.custom_mask = Buffer<uint8_t>("custom_mask", 0);
  PrefillMeta& p = plan->prefill;
  for (auto [buffer, name] : {std::pair{&p.qo_indptr, "qo_indptr"},
                              {&p.kv_lens, "kv_lens"},
                              {&p.kv_indptr, "kv_indptr"},
                              {&p.kv_indices, "kv_indices"},
                              {&p.swa_kv_indices, "swa_kv_indices"},
                              {&p.linear_kv_indptr, "linear_kv_indptr"},
                              {&p.linear_kv_indices, "linear_kv_indices"}})
    *buffer = Buffer<int32_t>(name, 0);

  switch (fb.mode) {
    case Mode::extend:
    case Mode::mixed:
    case Mode::draft_extend_v2:
      plan->path = MlaPath::prefill;
      plan_prefill(in, *plan);
      break;
    case Mode::idle:
    case Mode::decode:
    case Mode::target_verify:
    case Mode::draft_decode:
    case Mode::draft_q_only:  // refused above
      plan->path = MlaPath::latent_decode;
      plan_latent_decode(in, *plan);
      break;
  }
  return plan;
}

namespace {

class MlaBackend final : public Backend {
 public:
  std::string_view name() const override { return "mla"; }
  std::string_view family() const override { return "mla"; }

  std::string_view summary() const override {
    return "sglang's MLA backends (FlashMLA / cutlass MLA / AITER MLA) on MLA models only. DECODE, IDLE, "
           "TARGET_VERIFY and draft decode: single-head latent paged attention, page-granular block table "
           "(stride, then divide), cache_seqlens per mode, split-KV merged by LSE; verify trees through the "
           "EAGLE mask, drafting branches as rows of prefix ++ own branch. EXTEND, MIXED, DRAFT_EXTEND_V2: a "
           "token CSR gathers prefix + new latent K/V into a linear buffer that MHA reads through a layout "
           "descriptor with block_size 1. Windows and chunks are masks on positions; hybrid SWA pools get "
           "translated tables. CUDA graph: buffers at capture capacity, block table pre-filled with 1.";
  }

  Support supports(const Scenario& s) const override {
    if (!s.model.mla)
      return Support::no(
          "the MLA backends run only MLA models (one latent KV head, V the first v_head_dim "
          "dims of K); this model has " +
          std::to_string(s.model.kv_heads) +
          " KV heads with "
          "separate V");
    if (!s.model.sinks.empty()) return Support::no("attention sinks are not modelled on the mla family");
    return {};
  }

  std::vector<FaultInfo> faults() const override {
    return {
        {std::string(mla::kFaultPrefillBlockSizePage),
         "the prefill layout descriptor says block_size = page size instead of 1, so the kernel addresses "
         "the gathered linear per-token K/V in pages of ps tokens through kv_indices meant for tokens "
         "(sglang #25556, AITER make_mla_prefill_ps_meta_data)"},
        {std::string(mla::kFaultGraphKvIndicesPages),
         "the CUDA-graph kv_indices buffer is sized in pages, max_bs * ceil(max_context_len / ps), but the "
         "gather CSR writes one entry per token (sglang #24587, second half of #25556)"},
        {std::string(mla::kFaultGraphVerifyNoDraftRoom),
         "CUDA-graph verify buffers (block table rows, tree mask) are sized for the verified seq_len bound, "
         "without the D draft tokens each verify row also reads (sglang #27485, aiter MLA verify)"},
        {std::string(mla::kFaultDraftGraphNoTopk),
         "the multi-step draft CUDA-graph block table holds max_bs rows per step instead of max_bs * topk "
         "(sglang #27338 / #27460)"},
    };
  }

  std::unique_ptr<Plan> plan(const PlanInput& in) const override { return mla::plan_mla(in); }

  void run(const Plan& plan, const RunInput& in, RunOutput& out) const override {
    mla::run_mla(dynamic_cast<const mla::MlaPlan&>(plan), in, out);
  }
};

}  // namespace
}  // namespace mla

const Backend& mla_backend() {
  static const mla::MlaBackend backend;
  return backend;
}

}  // namespace kvfuzz
