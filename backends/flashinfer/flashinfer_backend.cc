#include "backends/flashinfer/flashinfer_backend.h"

#include "backends/flashinfer/flashinfer_executor.h"
#include "backends/flashinfer/flashinfer_planner.h"

namespace kvfuzz {
namespace {

class FlashInferBackend final : public Backend {
 public:
  explicit FlashInferBackend(bool paged) : paged_(paged) {}

  std::string_view name() const override { return paged_ ? "flashinfer_paged" : "flashinfer"; }
  std::string_view family() const override { return "paged_csr"; }

  std::string_view summary() const override {
    if (!paged_)
      return "sglang's FlashInfer backend: CSR metadata planned at page size 1 (kv_indices are token slots, "
             "kv_last_page_len all ones). Decode, target_verify (prefix + drafts with the tree custom mask), "
             "draft_extend_v2, draft decode (topk rows: prefix ++ own branch), idle; extend/mixed in the ragged "
             "style (new tokens from the batch, causal, merged by base-2 merge_state with the paged prefix) or one "
             "paged call under CUDA graphs. Full, sliding-window (W+1 keys, SWA-translated token slots) and chunked "
             "layers (trimmed CSR plus mask; no sglang path), GQA, softcap, CUDA-graph replay. No MLA.";
    return "FlashInfer's paged CSR at the cache's page size (kv_indices are page ids, kv_last_page_len in [1, ps], "
           "paged_kv_t::get_length), planned like sglang's FlashInfer backend otherwise: decode, target_verify, "
           "draft_extend_v2, draft decode (topk > 1: whole prefix pages plus the branch's pages, which start with "
           "its copy of the partial last page), idle, ragged-style extend/mixed. Window layers start at a page "
           "boundary and mask the page head (window_left or custom mask); SWA pages are the translated slot of "
           "each page's first token, divided by ps. GQA, softcap, CUDA-graph replay. No MLA.";
  }

  int32_t kernel_page_size(const Scenario& s) const override { return paged_ ? s.cache.page_size : 1; }

  Support supports(const Scenario& s) const override {
    if (s.model.mla) return Support::no("MLA models run on sglang's flashinfer_mla backend, not the MHA FlashInfer one");
    if (!s.model.sinks.empty()) return Support::no("attention sinks are not modelled on the paged_csr family");
    return {};
  }

  std::vector<FaultInfo> faults() const override {
    std::vector<FaultInfo> f;
    if (paged_) {
      f.push_back({flashinfer::kFaultLastPageLenOverflow,
                   "kv_last_page_len is page_size for every row instead of the keys on the last page; FlashInfer "
                   "never checks it (FlashInfer issue #320: last_page_len > page_size accepted silently), so rows "
                   "whose length is not a multiple of the page size read the unwritten tail of their last page"});
    }
    f.push_back({flashinfer::kFaultLseBaseMismatch,
                 "the ragged (new tokens) and paged (prefix) parts of an extend are merged with natural exp/log on "
                 "FlashInfer's base-2 LSEs (sglang triton_ops/merge_state.py fallback, used when heads x threads "
                 "> 1024; FlashInfer state.cuh/cascade.cuh work in base 2): the parts get wrong weights"});
    f.push_back({flashinfer::kFaultSwaDecodeWindowShort,
                 "sliding-window decode keeps min(seq_len, W) keys instead of W + 1, dropping the oldest in-window "
                 "key (the window off-by-one family; sglang PR #32087 describes it for the Triton backend)"});
    f.push_back({flashinfer::kFaultSwaUntranslated,
                 "window-layer kv_indices are full-pool slots not translated through full_to_swa (sglang #9123 "
                 "style missing translation); invisible while the SWA mapping is the identity"});
    return f;
  }

  std::unique_ptr<Plan> plan(const PlanInput& in) const override { return flashinfer::plan_flashinfer(in, paged_); }

  void run(const Plan& plan, const RunInput& in, RunOutput& out) const override {
    flashinfer::run_flashinfer(static_cast<const flashinfer::FlashInferPlan&>(plan), in, out);
  }

 private:
  bool paged_;
};

}  // namespace

const Backend& flashinfer_backend() {
  static const FlashInferBackend backend(false);
  return backend;
}

const Backend& flashinfer_paged_backend() {
  static const FlashInferBackend backend(true);
  return backend;
}

}  // namespace kvfuzz
