// The mla planner for prefill: EXTEND, MIXED and DRAFT_EXTEND_V2.
//
// Where it sits: forward batch -> **plan_prefill** -> PrefillMeta -> prefill executor
// (mla_executor.cc). Production MLA prefill runs MHA on linear per-token K/V rather than on the paged
// latent pool (sglang MLA backends, forward_extend): each row's prefix and new tokens are gathered from the
// pool, one token per entry, into contiguous batch-local tensors, and the prefill kernel is told
// how that linear buffer is laid out. So two pieces of metadata:
//   - the gather CSR: kv_indptr = cumsum(seq_lens), kv_indices = req_to_token[r_i][0 .. seq_len)
//     (create_flashinfer_kv_indices_triton; AITER: "kv_indptr/kv_indices are token-level for every
//     page_size"); hybrid SWA layers gather the same tokens translated through full_to_swa;
//   - the layout descriptor of the linear buffer: block_size 1, kv_indptr, kv_indices =
//     arange(total tokens) (AITER make_mla_prefill_ps_meta_data after sglang #25556, which pinned
//     block_size to 1 where it had been the page size).
// CUDA graph (draft extend is captured in production; kvfuzz pads EXTEND/MIXED the same way): the
// kv_indices buffer is allocated once for max_bs * max_context_len tokens (#25556's second half,
// #24587), counted in the unit the gather writes.
#include <algorithm>

#include "backends/mla/mla_faults.h"
#include "backends/mla/mla_planner.h"

namespace kvfuzz::mla {

void plan_prefill(const PlanInput& in, MlaPlan& plan) {
  const ForwardBatch& fb = in.batch;
  const int32_t ps = fb.page_size;
  const int32_t rows = fb.padded_bs;
  PrefillMeta& m = plan.prefill;
  m.qo_indptr = Buffer<int32_t>("qo_indptr", rows + 1);
  m.kv_lens = Buffer<int32_t>("kv_lens", rows);
  m.kv_indptr = Buffer<int32_t>("kv_indptr", rows + 1);
  m.linear_kv_indptr = Buffer<int32_t>("linear_kv_indptr", rows + 1);
  m.max_seqlen_q = m.max_seqlen_k = 0;
  for (int32_t i = 0; i < rows; ++i) {
    const int32_t q_len = fb.extend_lens[static_cast<size_t>(i)], k_len = fb.seq_lens[static_cast<size_t>(i)];
    m.qo_indptr.set(i + 1, m.qo_indptr[i] + q_len);
    m.kv_lens.set(i, k_len);
    m.kv_indptr.set(i + 1, m.kv_indptr[i] + k_len);
    m.linear_kv_indptr.set(i + 1, m.linear_kv_indptr[i] + k_len);
    m.max_seqlen_q = std::max(m.max_seqlen_q, q_len);
    m.max_seqlen_k = std::max(m.max_seqlen_k, k_len);
  }
  const int64_t total = m.kv_indptr[rows];

  const int64_t max_context = in.cache.config.max_context_len;
  int64_t capacity = total, linear_capacity = total;
  if (fb.graph()) {
    const int64_t per_row = in.fault(kFaultGraphKvIndicesPages) ? (max_context + ps - 1) / ps : max_context;
    capacity = int64_t{rows} * per_row;
    linear_capacity = int64_t{rows} * max_context;
  }
  m.kv_indices = Buffer<int32_t>("kv_indices", capacity);
  m.swa_kv_indices = Buffer<int32_t>("swa_kv_indices", plan.hybrid ? capacity : 0);
  for (int32_t i = 0; i < rows; ++i) {
    const int32_t row = fb.req_pool_indices[static_cast<size_t>(i)];
    for (int32_t k = 0; k < m.kv_lens[i]; ++k) {
      const int32_t slot = in.cache.r2t(row, k);
      m.kv_indices.set(m.kv_indptr[i] + k, slot);
      if (plan.hybrid)
        m.swa_kv_indices.set(m.kv_indptr[i] + k, static_cast<int32_t>(in.cache.full_to_swa[static_cast<size_t>(slot)]));
    }
  }

  m.block_size = in.fault(kFaultPrefillBlockSizePage) ? ps : 1;
  m.linear_kv_indices = Buffer<int32_t>("linear_kv_indices", linear_capacity);
  for (int64_t e = 0; e < total; ++e) m.linear_kv_indices.set(e, static_cast<int32_t>(e));
}

}  // namespace kvfuzz::mla
