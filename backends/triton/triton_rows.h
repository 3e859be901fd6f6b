// Which keys each kernel row of a Triton token CSR lists, per mode and layer rule.
//
// Where it sits: inside the planner (forward batch -> **row keys** -> kv_indptr / kv_indices).
// A row's keys are req_to_token columns: a contiguous run of prefix columns [first, prefix_end),
// then, for draft decode, the row's own branch steps [step_begin, step_end) at the drafting
// layout's columns (reference/draft_layout.h). Sources, sglang triton_backend.py unless said otherwise:
//   DECODE / IDLE        full: [0, seq_len) (seq_len counts the new token, written before the
//                        kernel); window W: the last min(seq_len, W + 1) keys — production
//                        update_sliding_window_buffer keeps min(seq_len, W) (#32087, the
//                        triton_swa_decode_window_short fault); chunk C: [floor(P / C) * C, seq_len)
//                        with P = seq_len - 1 (no production path: the natural window-style CSR).
//   draft decode         one row per (request, branch): the prefix plus the branch's steps 0..j
//                        (generate_draft_decode_kv_indices: the prefix from the request's own row,
//                        drafts from the branch's region; with ps > 1 and topk > 1 the prefix tail
//                        is read from the original last page, not the branch's copy). Window and
//                        chunk layers keep the suffix with positions >= the query's lowest visible
//                        position P - W or floor(P / C) * C, P = seq_len + j (no production window
//                        path for drafting: the natural one).
//   EXTEND / MIXED       the prefix only (extend_prefix_lens); window: the last min(prefix, W)
//                        prefix keys (window_kv_offsets = the first one); chunk: from
//                        floor(prefix / C) * C, the chunk of the first new token.
//   TARGET_VERIFY        the same over seq_lens (the verified prefix); drafts come from k_extend.
//   DRAFT_EXTEND_V2      the prefix is seq_lens - extend_lens (seq_lens already count the new
//                        tokens; #26651 fixed Triton's use of seq_lens here: the
//                        triton_draft_extend_v2_prefix fault).
//
//   TritonRowKeys keys = row_keys(fb, LayerKind::sliding_window, /*window_or_chunk=*/W, row, {});
//   for (int32_t k = 0; k < keys.len(); ++k) use(keys.column(k, fb));
#pragma once

#include <cstdint>

#include "reference/forward_batch.h"

namespace kvfuzz {

struct TritonRowKeys {
  int32_t request_row = 0;  // batch row whose req_to_token row the keys come from
  int32_t first = 0;        // prefix columns [first, prefix_end)
  int32_t prefix_end = 0;
  int32_t branch = 0;  // draft decode: the row's branch and its steps [step_begin, step_end)
  int32_t step_begin = 0, step_end = 0;

  int32_t prefix_len() const { return prefix_end - first; }
  int32_t len() const { return prefix_len() + step_end - step_begin; }
  // req_to_token column of key k (0 <= k < len()).
  int32_t column(int32_t k, const ForwardBatch& fb) const;
};

// Planner switches that change the rows (faults).
struct RowRule {
  bool decode_window_short = false;      // window CSR of DECODE keeps min(seq_len, W)
  bool v2_prefix_from_seq_lens = false;  // DRAFT_EXTEND_V2 prefix = seq_lens
};

// Whether a mode runs the decode kernel (one query per kernel row) rather than the extend kernel.
bool uses_decode_kernel(Mode mode);

// Kernel rows: padded_bs, times topk for draft decode.
int32_t kernel_rows(const ForwardBatch& fb);

// Kernel rows that belong to real requests (the rest are CUDA-graph padding).
int32_t real_kernel_rows(const ForwardBatch& fb);

// Query tokens of one kernel row: the decode kernel's row r is token r; the extend kernel's row i
// holds the request's extend_lens[i] tokens.
int32_t request_of_row(const ForwardBatch& fb, int32_t row);

// Prefix length the extend kernel's CSRs cover for request row i.
int32_t extend_prefix_len(const ForwardBatch& fb, int32_t i, const RowRule& rule);

TritonRowKeys row_keys(const ForwardBatch& fb, LayerKind kind, int32_t window_or_chunk, int32_t row,
                       const RowRule& rule);

// Lowest position a query at `position` sees through a rule (full: 0, window: P - W, chunk:
// the chunk start).
int32_t lowest_position(LayerKind kind, int32_t window_or_chunk, int32_t position);

}  // namespace kvfuzz
