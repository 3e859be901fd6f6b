#include "backends/contract/families.h"

#include "backends/fa/fa_backend.h"
#include "backends/flashinfer/flashinfer_backend.h"
#include "backends/mla/mla_backend.h"
#include "backends/triton/triton_backend.h"

namespace kvfuzz {

const std::vector<Family>& families() {
  static const std::vector<Family> list = {
      {"page_table",
       "flash_attn_with_kvcache style: per layer group, calls (cascade parts merged by LSE) of page-granular tables, "
       "cache_seqlens and cu_seqlens_q; local-attention virtual batches and spec cascades are further calls",
       fa::write_plan, fa::read_plan, fa_backend, fa::batch_shape, fa::merge_plans},
      {"paged_csr",
       "FlashInfer wrapper calls: qo_indptr, kv_indptr, kv_indices (page ids), kv_last_page_len, custom masks; "
       "sglang plans it at kernel page size 1 (token CSR), FlashInfer users at the cache's page size",
       flashinfer::write_plan, flashinfer::read_plan, flashinfer_paged_backend, flashinfer::batch_shape,
       flashinfer::merge_plans},
      {"token_csr",
       "sglang Triton kernels: token-slot CSRs per window rule with kv_offsets and per-row num_kv_splits (split-KV "
       "decode), prefix-only CSRs + new-token tensors + custom mask for extend and verify",
       triton::write_plan, triton::read_plan, triton_backend, triton::batch_shape, triton::merge_plans},
      {"mla",
       "MLA latent attention: single-head block tables (FlashMLA style) for decode, verify and drafting; a gather CSR "
       "and a linear layout descriptor for prefill",
       mla::write_plan, mla::read_plan, mla_backend, mla::batch_shape, mla::merge_plans},
  };
  return list;
}

const Family* find_family(std::string_view name) {
  for (const Family& f : families())
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace kvfuzz
