// The mla planner for the latent decode kernels: DECODE, IDLE, TARGET_VERIFY and multi-step
// draft decode.
//
// Where it sits: forward batch -> **plan_latent_decode** -> LatentDecodeMeta -> latent decode
// executor (mla_executor.cc). Production facts (sglang flashmla_backend.py):
//   - block_table[i][p] = req_to_token[r_i][p * ps] / ps (create_flashmla_kv_indices_triton:
//     stride, then divide); SWA pools translate the token slot first, then divide;
//   - cache_seqlens: DECODE seq_len (counts the new token), TARGET_VERIFY seq_len + D (the drafts
//     are already in req_to_token), draft decode step j: seq_len + j + 1;
//   - eager tables are exact, (rows, ceil(max keys / ps)), pre-filled with -1; CUDA-graph tables
//     are allocated once, (max_bs, (max_context_len + ps) / ps), pre-filled with 1 — page 1, a real
//     page. A padded row (request row 0, seq_len 1) overwrites the entries it reads with
//     req_to_token[0][.] / ps = 0, the dummy page; the 1s stay only past cache_seqlens, where no
//     kernel reads;
//   - multi-step drafting (FlashMLAMultiStepDraftBackend) fills the tables of all steps at once,
//     one per step, rows = bs * topk in the graph buffer (#27338 / #27460 added the topk factor).
// Tree verify: FlashMLA itself is causal-chain only (causal=True, bottom-right). kvfuzz runs the
// tree by handing the kernel the EAGLE tree mask (D rows x (seq_len + D) columns per request, as
// build_tree_kernel_efficient's FULL_MASK) that replaces the causal rule; a chain's mask is causal.
#include <algorithm>

#include "backends/mla/mla_faults.h"
#include "backends/mla/mla_planner.h"
#include "reference/draft_layout.h"

namespace kvfuzz::mla {
namespace {

int32_t ceil_div(int64_t a, int64_t b) { return static_cast<int32_t>((a + b - 1) / b); }

// Keys a kernel row of batch row `i` reads at drafting step `step`: the written extent.
int32_t kv_len(const ForwardBatch& fb, int32_t i, int32_t step) {
  const int32_t s = fb.seq_lens[static_cast<size_t>(i)];
  switch (fb.mode) {
    case Mode::target_verify: return s + fb.draft_tokens;
    case Mode::draft_decode: return s + step + 1;
    default: return s;
  }
}

// req_to_token[row][column], refusing a column past the row (a planner bug, not a kernel read).
int32_t r2t(const CacheState& cache, int32_t row, int32_t column) {
  if (column < 0 || column >= cache.config.max_context_len)
    throw Violation("req_to_token", "column " + std::to_string(column) + " of row " + std::to_string(row) +
                                        " is outside its " + std::to_string(cache.config.max_context_len) + " columns");
  return cache.r2t(row, column);
}

// create_flashmla_kv_indices_triton for one kernel row, the branch row of `branch` (drafting rows
// read their branch's region): page p of the row holds the key p * ps.
void fill_row(const PlanInput& in, const DraftLayout& layout, int32_t branch, int32_t batch_row, int32_t len,
              int64_t offset, MlaPlan& plan) {
  const int32_t ps = in.batch.page_size;
  const int32_t row = in.batch.req_pool_indices[static_cast<size_t>(batch_row)];
  for (int32_t page = 0; int64_t{page} * ps < len; ++page) {
    const int32_t slot = r2t(in.cache, row, layout.key_column(branch, page * ps, ps));
    plan.decode.block_table.set(offset + page, slot / ps);
    if (plan.hybrid)
      plan.decode.swa_block_table.set(offset + page,
                                      static_cast<int32_t>(in.cache.full_to_swa[static_cast<size_t>(slot)] / ps));
  }
}

}  // namespace

void plan_latent_decode(const PlanInput& in, MlaPlan& plan) {
  const ForwardBatch& fb = in.batch;
  const int32_t ps = fb.page_size;
  const int32_t max_context = in.cache.config.max_context_len;
  const bool drafting = fb.mode == Mode::draft_decode;
  const bool verify = fb.mode == Mode::target_verify;
  LatentDecodeMeta& m = plan.decode;
  m.rows_per_request = drafting ? fb.topk : 1;
  m.rows = fb.padded_bs * m.rows_per_request;
  m.steps = drafting ? fb.draft_steps : 1;
  m.step = drafting ? fb.draft_step : 0;
  m.max_seqlen_q = verify ? fb.draft_tokens : 1;
  m.num_splits = fb.kv_splits;
  m.tree_mask = verify;

  // Capacity: eager buffers fit this batch; CUDA-graph buffers fit the captured batch size and
  // the whole context. sglang sizes graph buffers from the served context_len, and its
  // ReqToTokenPool rows are wider by the speculative headroom; kvfuzz's max_context_len is that
  // row width, so a verify row holds at most (max_context_len - D) verified tokens + D drafts.
  int32_t graph_context = max_context;
  if (verify && in.fault(kFaultGraphVerifyNoDraftRoom)) graph_context = max_context - fb.draft_tokens;
  int32_t longest = 0;
  for (int32_t i = 0; i < fb.padded_bs; ++i) longest = std::max(longest, kv_len(fb, i, m.steps - 1));
  if (fb.graph()) {
    m.width = (graph_context + ps) / ps;
    const bool topk_rows = drafting && !in.fault(kFaultDraftGraphNoTopk);
    m.row_capacity = fb.padded_bs * (topk_rows ? fb.topk : 1);
  } else {
    m.width = ceil_div(longest, ps);
    m.row_capacity = m.rows;
  }
  const int32_t fill = fb.graph() ? 1 : -1;
  const int64_t table_entries = int64_t{m.steps} * m.row_capacity * m.width;
  m.block_table = Buffer<int32_t>("block_table", table_entries, fill);
  m.swa_block_table = Buffer<int32_t>("swa_block_table", plan.hybrid ? table_entries : 0, fill);
  m.cache_seqlens = Buffer<int32_t>("cache_seqlens", int64_t{m.steps} * m.row_capacity, fb.graph() ? 1 : 0);
  m.cu_seqlens_q = Buffer<int32_t>("cu_seqlens_q", m.rows + 1);

  // Every step's table, in step order (generate_draft_decode_kv_indices runs all steps at once).
  for (int32_t step = 0; step < m.steps; ++step) {
    for (int32_t i = 0; i < fb.padded_bs; ++i) {
      const int32_t s = fb.seq_lens[static_cast<size_t>(i)];
      // Rows without drafts (other modes; padded rows, whose keys are req_to_token row 0, all
      // dummy slots) have the layout of no steps: every key is its own column.
      const bool drafts = drafting && i < fb.bs;
      const DraftLayout layout = draft_layout(s, ps, drafts ? fb.topk : 1, drafts ? fb.draft_steps : 0);
      for (int32_t t = 0; t < m.rows_per_request; ++t) {
        const int32_t r = i * m.rows_per_request + t;
        const int64_t row_index = int64_t{step} * m.row_capacity + r;
        fill_row(in, layout, t, i, kv_len(fb, i, step), row_index * m.width, plan);
        m.cache_seqlens.set(row_index, kv_len(fb, i, step));
      }
    }
  }
  m.max_seqlen_k = 0;
  for (int32_t i = 0; i < fb.padded_bs; ++i) m.max_seqlen_k = std::max(m.max_seqlen_k, kv_len(fb, i, m.step));
  for (int32_t r = 0; r <= m.rows; ++r) m.cu_seqlens_q.set(r, r * m.max_seqlen_q);

  // Tree mask: rows of D x (seq_len + D), as the batch carries it (spec_info.custom_mask).
  int64_t mask_entries = 0;
  for (int32_t i = 0; verify && i < fb.padded_bs; ++i) mask_entries += int64_t{fb.draft_tokens} * kv_len(fb, i, 0);
  const int64_t mask_capacity = fb.graph() ? int64_t{fb.padded_bs} * fb.draft_tokens * graph_context : mask_entries;
  m.mask_indptr = Buffer<int64_t>("mask_indptr", verify ? m.rows + 1 : 0);
  m.custom_mask = Buffer<uint8_t>("custom_mask", verify ? mask_capacity : 0);
  if (verify) {
    m.mask_indptr.set(0, 0);
    for (int32_t i = 0; i < fb.padded_bs; ++i)
      m.mask_indptr.set(i + 1, m.mask_indptr[i] + int64_t{fb.draft_tokens} * kv_len(fb, i, 0));
    for (int64_t e = 0; e < mask_entries; ++e) m.custom_mask.set(e, fb.custom_mask[static_cast<size_t>(e)]);
  }
}

}  // namespace kvfuzz::mla
