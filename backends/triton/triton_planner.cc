// The Triton planner (see triton_planner.h). Capacities follow triton_backend.py
// init_cuda_graph_state: CUDA-graph buffers are allocated once for the captured batch with
//   max_num_tokens = padded_bs * tokens per request (1 decode, D verify, topk draft decode, the
//                    longest extend otherwise),
//   kv_indices      max_num_tokens * max_context_len (int64),
//   custom_mask     max_num_tokens * max_context_len (uint8),
//   window indices  max_num_tokens * (W + 1) (production: * W, one short of the correct window),
//   chunk indices   max_num_tokens * C,
// then filled by replay: kv_indptr recomputed over all padded rows (fill value seq_len 1, request
// row 0), num_kv_splits refilled from the padded lengths. Eager batches get exact sizes. All
// writes go through Buffer::set, so a write past a capacity is a Violation naming the buffer.
#include "backends/triton/triton_planner.h"

#include <algorithm>

#include "backends/common/planned_modes.h"
#include "backends/triton/triton_kv_splits.h"
#include "backends/triton/triton_rows.h"

namespace kvfuzz {
namespace {

struct Switches {
  RowRule rule;
  bool graph_pages = false;
  bool verify_no_room = false;
  bool seq_sum_unpadded = false;
};

int32_t tokens_per_request(const ForwardBatch& fb) {
  int32_t t = 1;
  for (int32_t e : fb.extend_lens) t = std::max(t, e);
  return t;
}

// The CUDA-graph capacity of a CSR's indices (see the file comment and the faults).
int64_t graph_capacity(const ForwardBatch& fb, const CacheConfig& cfg, const KvCsr& csr, const Switches& sw) {
  const int64_t max_num_tokens = int64_t{fb.padded_bs} * tokens_per_request(fb);
  switch (csr.kind) {
    case LayerKind::sliding_window:
      return max_num_tokens * (csr.window_or_chunk + 1);
    case LayerKind::chunked:
      return max_num_tokens * csr.window_or_chunk;
    case LayerKind::full:
      break;
  }
  int64_t capacity = max_num_tokens * cfg.max_context_len;
  // #24587: sized in pages, filled per token.
  if (sw.graph_pages)
    capacity = std::min(capacity, int64_t{fb.padded_bs} * ((cfg.max_context_len + cfg.page_size - 1) / cfg.page_size));
  // #27485: verify buffers sized like decode ones, one max_context_len row per request.
  if (sw.verify_no_room && fb.mode == Mode::target_verify)
    capacity = std::min(capacity, int64_t{fb.padded_bs} * cfg.max_context_len);
  return capacity;
}

int64_t to_slot(const PlanInput& in, const KvCsr& csr, int32_t request_row, int32_t column) {
  const int32_t r2t_row = in.batch.req_pool_indices[static_cast<size_t>(request_row)];
  const int64_t slot = in.cache.r2t(r2t_row, column);
  // SWA pools of hybrid models: translate_loc_from_full_to_swa on the token slots.
  return csr.pool == PoolKind::swa ? in.cache.full_to_swa[static_cast<size_t>(slot)] : slot;
}

void build_csr(const PlanInput& in, int32_t rows, KvCsr& csr, const Switches& sw) {
  const ForwardBatch& fb = in.batch;
  std::vector<TritonRowKeys> keys;
  keys.reserve(static_cast<size_t>(rows));
  for (int32_t r = 0; r < rows; ++r) keys.push_back(row_keys(fb, csr.kind, csr.window_or_chunk, r, sw.rule));

  // kv_indptr[1:] = cumsum(kv_lens) over every kernel row, padded ones included.
  std::vector<int64_t> indptr(static_cast<size_t>(rows) + 1, 0);
  for (int32_t r = 0; r < rows; ++r)
    indptr[static_cast<size_t>(r) + 1] = indptr[static_cast<size_t>(r)] + keys[static_cast<size_t>(r)].len();
  const int32_t real = real_kernel_rows(fb);
  if (sw.seq_sum_unpadded && fb.graph() && csr.kind == LayerKind::full) {
    // #26880: the total is seq_lens_sum of the real rows only; the padded rows' ranges (their
    // fill-value keys) are laid out to end at that total, inside the last real rows' range.
    int64_t end = indptr[static_cast<size_t>(real)];
    for (int32_t r = rows; r > real; --r) {
      indptr[static_cast<size_t>(r)] = end;
      end -= keys[static_cast<size_t>(r) - 1].len();
    }
    indptr[static_cast<size_t>(real)] = end;
  }

  const int64_t capacity = fb.graph() ? graph_capacity(fb, in.scenario.cache, csr, sw) : indptr.back();
  csr.kv_indptr = Buffer<int32_t>(csr.name("kv_indptr"), rows + 1);
  csr.kv_indices = Buffer<int64_t>(csr.name("kv_indices"), capacity);
  csr.kv_offsets = Buffer<int32_t>(csr.name("kv_offsets"), rows);
  for (int32_t r = 0; r <= rows; ++r) csr.kv_indptr.set(r, static_cast<int32_t>(indptr[static_cast<size_t>(r)]));
  // create_flashinfer_kv_indices_triton: row r writes its kv_len slots from kv_indptr[r], rows
  // in order (a later row's write wins where ranges overlap).
  for (int32_t r = 0; r < rows; ++r) {
    const TritonRowKeys& k = keys[static_cast<size_t>(r)];
    csr.kv_offsets.set(r, k.first);
    for (int32_t n = 0; n < k.len(); ++n) {
      // A padded row's drafts are its out_cache_loc entries, all the dummy slot 0: its draft
      // layout (computed from the fill seq_len 1) may reach past the req_to_token row.
      const bool padded_draft = k.request_row >= fb.bs && n >= k.prefix_len();
      csr.kv_indices.set(indptr[static_cast<size_t>(r)] + n,
                         padded_draft ? 0 : to_slot(in, csr, k.request_row, k.column(n, fb)));
    }
  }
}

// get_num_kv_splits over the lengths production passes: seq_lens for the full CSR (one group of
// topk rows per request in draft decode), window_kv_lens, the rows' own lengths, for windows.
// Padded rows are counted with their fill values, as replay does.
void fill_kv_splits(const PlanInput& in, const TritonPlan& p, KvCsr& csr) {
  const ForwardBatch& fb = in.batch;
  const SplitConfig config{p.max_kv_splits, fb.device_sms, in.scenario.model.q_heads, in.scenario.model.kv_heads};
  std::vector<int32_t> lens;
  int32_t group = 1;
  if (csr.kind == LayerKind::full) {
    lens.assign(fb.seq_lens.begin(), fb.seq_lens.begin() + fb.padded_bs);
    group = p.queries_per_request;
  } else {
    for (int32_t r = 0; r < p.rows; ++r) lens.push_back(csr.kv_indptr[r + 1] - csr.kv_indptr[r]);
  }
  const std::vector<int32_t> splits = triton_kv_splits(lens, group, config);
  csr.num_kv_splits = Buffer<int32_t>(csr.name("num_kv_splits"), p.rows);
  for (int32_t r = 0; r < p.rows; ++r) csr.num_kv_splits.set(r, splits[static_cast<size_t>(r)]);
}

// One CSR per (kind, window_or_chunk): full first, then windows and chunks in layer order.
void assign_csrs(const Scenario& s, TritonPlan& p) {
  p.csrs.emplace_back();
  for (int32_t l = 0; l < static_cast<int32_t>(s.model.layers.size()); ++l) {
    const Layer& layer = s.model.layers[static_cast<size_t>(l)];
    const int32_t window_or_chunk = layer.kind == LayerKind::sliding_window ? layer.window
                                    : layer.kind == LayerKind::chunked      ? layer.chunk
                                                                            : 0;
    size_t c = 0;
    while (c < p.csrs.size() && !(p.csrs[c].kind == layer.kind && p.csrs[c].window_or_chunk == window_or_chunk)) ++c;
    if (c == p.csrs.size()) {
      // The layers of one (kind, window_or_chunk) read one pool; csrs[0]'s full layers the full pool.
      p.csrs.emplace_back();
      p.csrs.back().kind = layer.kind;
      p.csrs.back().window_or_chunk = window_or_chunk;
      p.csrs.back().pool = pool_of(s, l);
    }
    p.layer_csr.push_back(static_cast<int32_t>(c));
  }
}

void build_verify_mask(const PlanInput& in, TritonPlan& p, const Switches& sw) {
  const ForwardBatch& fb = in.batch;
  const CacheConfig& cfg = in.scenario.cache;
  const int64_t d = fb.draft_tokens;
  // mask_indptr[1:] = cumsum(D * (seq_lens + D)) over every row (padded rows: D * (1 + D)).
  p.mask_indptr = Buffer<int64_t>("mask_indptr", fb.padded_bs + 1);
  p.mask_indptr.set(0, 0);
  for (int32_t i = 0; i < fb.padded_bs; ++i)
    p.mask_indptr.set(i + 1, p.mask_indptr[i] + d * (fb.seq_lens[static_cast<size_t>(i)] + d));
  int64_t capacity = static_cast<int64_t>(fb.custom_mask.size());
  if (fb.graph()) {
    capacity = int64_t{fb.padded_bs} * tokens_per_request(fb) * cfg.max_context_len;
    if (sw.verify_no_room) capacity = int64_t{fb.padded_bs} * cfg.max_context_len;
  }
  // The replay copies spec_info.custom_mask into the front of the static buffer.
  p.custom_mask = Buffer<uint8_t>("custom_mask", capacity);
  for (size_t e = 0; e < fb.custom_mask.size(); ++e) p.custom_mask.set(static_cast<int64_t>(e), fb.custom_mask[e]);
}

}  // namespace

std::vector<FaultInfo> triton_fault_list() {
  return {
      {std::string(triton_fault::kSwaDecodeWindowShort),
       "DECODE window CSR keeps min(seq_len, W) keys instead of W + 1: the oldest in-window key is dropped "
       "(sglang update_sliding_window_buffer; PR #32087, open)"},
      {std::string(triton_fault::kGraphKvIndicesPages),
       "CUDA-graph kv_indices sized in pages (padded_bs * ceil(max_context_len / page_size)) but written per "
       "token: out-of-capacity write once the batch's keys exceed it with page_size > 1 (sglang #24587, aiter)"},
      {std::string(triton_fault::kGraphVerifyNoDraftRoom),
       "CUDA-graph TARGET_VERIFY buffers sized for seq_len like decode ones (padded_bs * max_context_len), "
       "without room for the D draft tokens: the custom mask, D * (seq_len + D) per request, overflows "
       "(sglang #27485)"},
      {std::string(triton_fault::kSeqLensSumUnpadded),
       "CUDA-graph kv_indptr total taken from seq_lens_sum of the real rows only, without the padded rows' "
       "fill values: the padded rows' ranges end at that total, inside the last real row's keys, which lose "
       "their tail (sglang #26880)"},
      {std::string(triton_fault::kDraftExtendV2Prefix),
       "DRAFT_EXTEND_V2 prefix CSR built from seq_lens instead of seq_lens - extend_lens: the new tokens are "
       "read from the cache as prefix (by every query) and again from k_extend (sglang #26651, Triton)"},
  };
}

std::unique_ptr<TritonPlan> plan_triton(const PlanInput& in) {
  refuse_unplanned_mode(in.batch, "triton");
  const ForwardBatch& fb = in.batch;
  Switches sw;
  sw.rule.decode_window_short = in.fault(triton_fault::kSwaDecodeWindowShort);
  sw.rule.v2_prefix_from_seq_lens = in.fault(triton_fault::kDraftExtendV2Prefix);
  sw.graph_pages = in.fault(triton_fault::kGraphKvIndicesPages);
  sw.verify_no_room = in.fault(triton_fault::kGraphVerifyNoDraftRoom);
  sw.seq_sum_unpadded = in.fault(triton_fault::kSeqLensSumUnpadded);

  auto p = std::make_unique<TritonPlan>();
  p->mode = fb.mode;
  p->graph = fb.graph();
  p->bs = fb.bs;
  p->padded_bs = fb.padded_bs;
  p->rows = kernel_rows(fb);
  p->queries_per_request = fb.mode == Mode::draft_decode ? fb.topk : 1;
  p->max_kv_splits = std::max(1, fb.kv_splits);
  p->use_custom_mask = fb.mode == Mode::target_verify;
  p->sinks = in.scenario.model.sinks;  // the layer's sinks, as every kernel call is handed them
  p->kernel = p->rows == 0                  ? TritonKernel::none
              : uses_decode_kernel(fb.mode) ? TritonKernel::decode
                                            : TritonKernel::extend;

  assign_csrs(in.scenario, *p);
  for (KvCsr& csr : p->csrs) {
    build_csr(in, p->rows, csr, sw);
    if (p->kernel == TritonKernel::decode) fill_kv_splits(in, *p, csr);
  }

  p->positions = Buffer<int32_t>("positions", fb.num_tokens());
  for (int64_t t = 0; t < fb.num_tokens(); ++t) p->positions.set(t, fb.positions[static_cast<size_t>(t)]);

  p->qo_indptr = Buffer<int32_t>("qo_indptr", p->kernel == TritonKernel::extend ? fb.padded_bs + 1 : 0);
  if (p->kernel == TritonKernel::extend) {
    p->qo_indptr.set(0, 0);
    for (int32_t i = 0; i < fb.padded_bs; ++i)
      p->qo_indptr.set(i + 1, p->qo_indptr[i] + fb.extend_lens[static_cast<size_t>(i)]);
  }
  p->mask_indptr = Buffer<int64_t>("mask_indptr", 0);
  p->custom_mask = Buffer<uint8_t>("custom_mask", 0);
  if (p->use_custom_mask && p->kernel == TritonKernel::extend) build_verify_mask(in, *p, sw);
  return p;
}

std::string KvCsr::name(const std::string& field) const {
  switch (kind) {
    case LayerKind::full:
      return field;
    case LayerKind::sliding_window:
      return "window_" + field + "(W=" + std::to_string(window_or_chunk) + ")";
    case LayerKind::chunked:
      return "chunk_" + field + "(C=" + std::to_string(window_or_chunk) + ")";
  }
  return field;
}

}  // namespace kvfuzz
