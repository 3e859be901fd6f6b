// Building FlashInfer paged-CSR rows from req_to_token: page ids, indptr, last_page_len.
//
// Where it sits: inside the planner (flashinfer_planner.cc). The planner decides, per kernel
// row, which source keys it needs ([begin, end), after window/chunk trimming); this file turns
// them into page ids the way sglang's create_flashinfer_kv_indices_triton does at page size 1
// (kv_indices[indptr[i] + t] = req_to_token[r_i][start + t]) and the page-granular way at page
// size ps: the slot of each page's first token, translated full->SWA for SWA-pool layers, then
// divided by ps (translate, then divide: SEMANTICS §1). The rows stay host vectors until
// commit() copies them into checked buffers of the production capacity.
//
//   CsrWriter csr(cache, ps, /*translate=*/pool == PoolKind::swa, /*overflow=*/false);
//   WrapperDraft d;
//   int64_t first_key = csr.append_row(d, CsrRowKeys{row}, begin, end);
//   WrapperPlan w = commit(std::move(d), "full.paged", std::nullopt);
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backends/flashinfer/flashinfer_plan.h"
#include "reference/cache.h"

namespace kvfuzz::flashinfer {

// The source keys of one CSR row. Source key k is req_to_token column k of the request, except
// from `branch_start` on, where the keys are a draft branch's region: `branch_tail` copies of the
// prefix tail (page size > 1 with topk > 1, reference/draft_layout.h), then the branch's draft steps, whose slots
// are `branch_slots` (the branch's out_cache_loc, [draft_steps]).
struct CsrRowKeys {
  int32_t req_row = 0;
  int64_t branch_start = std::numeric_limits<int64_t>::max();
  int32_t branch_tail = 0;
  const int64_t* branch_slots = nullptr;
};

// One wrapper call's arrays while the planner fills them, as host vectors.
struct WrapperDraft {
  Role role = Role::decode;
  bool causal = true;
  int32_t window_left = -1;
  bool has_mask = false;
  int32_t rows_per_batch_row = 1;
  std::vector<int32_t> qo_indptr{0};        // [rows + 1]
  std::vector<int32_t> kv_indptr{0};        // [rows + 1]
  std::vector<int32_t> kv_indices;          // [pages]
  std::vector<int32_t> kv_last_page_len;    // [rows]
  std::vector<uint8_t> custom_mask;         // [sum q_len * kv_len]
  std::vector<int32_t> mask_indptr{0};      // [rows + 1]

  int32_t rows() const { return static_cast<int32_t>(qo_indptr.size()) - 1; }
  void add_queries(int64_t q_len) { qo_indptr.push_back(static_cast<int32_t>(qo_indptr.back() + q_len)); }
};

class CsrWriter {
 public:
  // translate: map slots through full_to_swa (SWA-pool layers). last_page_overflow: the
  // flashinfer_last_page_len_overflow fault.
  CsrWriter(const CacheState& cache, int32_t page_size, bool translate, bool last_page_overflow)
      : cache_(cache), ps_(page_size), translate_(translate), overflow_(last_page_overflow) {}

  // Appends one row holding source keys [begin, end): begin is rounded down to its page (FlashInfer
  // rows start at a page's first entry; the planner masks the keys before `begin`). Returns the
  // source key of the row's kernel key 0; an empty range gives a row without pages.
  int64_t append_row(WrapperDraft& d, const CsrRowKeys& keys, int64_t begin, int64_t end) const;

  // The page id holding source key `key0` (the first key of a page) of a row.
  int32_t page_of(const CsrRowKeys& keys, int64_t key0) const;

  int32_t page_size() const { return ps_; }

 private:
  const CacheState& cache_;
  int32_t ps_;
  bool translate_, overflow_;
};

// Production capacities of a CUDA-graph capture (flashinfer_backend.py
// init_cuda_graph_state): kv_indices and the custom
// mask hold max_num_tokens * max_context_len entries; indptrs and kv_last_page_len are sized for
// the captured batch.
struct GraphCapacity {
  int64_t kv_indices = 0;
  int64_t custom_mask = 0;
};

// Copies a draft into checked buffers named "<name>.kv_indices" etc.: exact sizes for eager
// batches, the graph capacities for CUDA-graph replay (writes past them throw a Violation).
WrapperPlan commit(WrapperDraft&& d, int32_t page_size, const std::string& name, std::optional<GraphCapacity> graph);

}  // namespace kvfuzz::flashinfer
