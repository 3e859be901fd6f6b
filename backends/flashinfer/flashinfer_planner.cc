#include "backends/flashinfer/flashinfer_planner.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include "backends/common/planned_modes.h"
#include "backends/flashinfer/csr_rows.h"
#include "reference/draft_layout.h"

namespace kvfuzz::flashinfer {

int64_t lowest_position(const Layer& layer, int64_t position) {
  if (position < 0) return 0;
  switch (layer.kind) {
    case LayerKind::full: return 0;
    case LayerKind::sliding_window: return std::max<int64_t>(0, position - layer.window);
    case LayerKind::chunked: return position / layer.chunk * layer.chunk;
  }
  return 0;
}

namespace {

std::string group_tag(const Layer& l) {
  switch (l.kind) {
    case LayerKind::full: return "full";
    case LayerKind::sliding_window: return "window" + std::to_string(l.window);
    case LayerKind::chunked: return "chunk" + std::to_string(l.chunk);
  }
  return "?";
}

class Planner {
 public:
  Planner(const PlanInput& in, bool paged)
      : in_(in), fb_(in.batch), ps_(paged ? in.batch.page_size : 1), paged_(paged) {}

  std::unique_ptr<FlashInferPlan> run() {
    auto plan = std::make_unique<FlashInferPlan>();
    plan->page_size = ps_;
    // sglang picks FlashInfer's merge_state, or its Triton merge_state fallback, which uses
    // natural exp/log on FlashInfer's base-2 LSEs (reference/CONVENTIONS.md).
    plan->merge = in_.fault(kFaultLseBaseMismatch) ? MergeKernel::natural_exp : MergeKernel::flashinfer_base2;
    std::map<std::tuple<LayerKind, int32_t, int32_t>, int32_t> groups;
    for (const Layer& l : in_.scenario.model.layers) {
      const auto key = std::make_tuple(l.kind, l.window, l.chunk);
      auto [it, fresh] = groups.emplace(key, static_cast<int32_t>(plan->groups.size()));
      if (fresh) plan->groups.push_back(plan_group(l, static_cast<int32_t>(&l - in_.scenario.model.layers.data())));
      plan->group_of_layer.push_back(it->second);
    }
    return plan;
  }

 private:
  LayerGroupPlan plan_group(const Layer& l, int32_t layer_index) {
    LayerGroupPlan g;
    g.layer = l;
    // SWA-pool layers read translated slots (#9123 is the missing translation).
    const bool translate = pool_of(in_.scenario, layer_index) == PoolKind::swa && !in_.fault(kFaultSwaUntranslated);
    const CsrWriter csr(in_.cache, ps_, translate, paged_ && in_.fault(kFaultLastPageLenOverflow));
    const std::string tag = group_tag(l);
    auto add = [&](WrapperDraft&& d) {
      const std::string name = tag + "." + to_string(d.role);
      g.calls.push_back(commit(std::move(d), ps_, name, capacity()));
    };
    switch (fb_.mode) {
      case Mode::idle:
      case Mode::decode: add(decode_call(l, csr)); break;
      case Mode::draft_decode: add(draft_call(l, csr)); break;
      case Mode::draft_q_only:
        break;  // refused by plan_flashinfer
      case Mode::target_verify: add(verify_call(l, csr)); break;
      case Mode::draft_extend_v2: add(full_extend_call(l, csr)); break;
      case Mode::extend:
      case Mode::mixed:
        if (fb_.graph()) {
          add(full_extend_call(l, csr));
        } else {
          add(ragged_call(l));
          if (any_prefix()) add(prefix_call(l, csr));
        }
        break;
    }
    return g;
  }

  // CUDA-graph buffers are sized once for the captured batch: max_num_tokens * max_context_len.
  std::optional<GraphCapacity> capacity() const {
    if (!fb_.graph()) return std::nullopt;
    const int64_t n = fb_.num_tokens() * in_.cache.config.max_context_len;
    return GraphCapacity{n, n};
  }

  bool any_prefix() const {
    for (int32_t i = 0; i < fb_.bs; ++i)
      if (fb_.prefix_lens[static_cast<size_t>(i)] > 0) return true;
    return false;
  }

  int32_t req_row(int32_t i) const { return fb_.req_pool_indices[static_cast<size_t>(i)]; }

  // First key a decode-like row keeps: its query sits at key end - 1 = its position.
  int64_t decode_begin(const Layer& l, int64_t end) const {
    if (l.kind == LayerKind::sliding_window) {
      // FlashInfer's update_sliding_window keeps min(seq_len, W + 1) keys; the window fault keeps
      // W (the off-by-one of sglang #32087).
      const int64_t keep = in_.fault(kFaultSwaDecodeWindowShort) ? l.window : int64_t{l.window} + 1;
      return end - std::min(end, keep);
    }
    return lowest_position(l, end - 1);
  }

  // Decode rows need window_left only to mask the head of a page a window starts inside; with
  // page size 1 the indices alone trim the window, as in sglang.
  int32_t decode_window_left(const Layer& l) const {
    return l.kind == LayerKind::sliding_window && ps_ > 1 ? l.window : -1;
  }

  WrapperDraft decode_call(const Layer& l, const CsrWriter& csr) const {
    WrapperDraft d;
    d.role = Role::decode;
    d.window_left = decode_window_left(l);
    for (int32_t i = 0; i < fb_.padded_bs; ++i) {
      const int64_t end = fb_.seq_lens[static_cast<size_t>(i)];
      csr.append_row(d, CsrRowKeys{req_row(i)}, decode_begin(l, end), end);
      d.add_queries(1);
    }
    return d;
  }

  // Draft decode, step j: row (i, t) reads the prefix and its branch's steps 0..j. topk = 1 reads
  // the chain from req_to_token; topk > 1 reads the branch's out_cache_loc slots, after the
  // prefix's whole pages and the branch's copy of the partial last page when pages are > 1.
  WrapperDraft draft_call(const Layer& l, const CsrWriter& csr) const {
    WrapperDraft d;
    d.role = Role::draft;
    d.rows_per_batch_row = fb_.topk;
    d.window_left = decode_window_left(l);
    for (int32_t i = 0; i < fb_.padded_bs; ++i) {
      const int64_t s = fb_.seq_lens[static_cast<size_t>(i)];
      // Page-granular rows read the partial last page from the branch's copy (draft_layout.h).
      const DraftLayout drafts = draft_layout(static_cast<int32_t>(s), fb_.page_size, fb_.topk, fb_.draft_steps);
      for (int32_t t = 0; t < fb_.topk; ++t) {
        CsrRowKeys keys{req_row(i)};
        if (fb_.topk > 1) {
          keys.branch_start = ps_ > 1 ? drafts.base : drafts.seq_len;
          keys.branch_tail = ps_ > 1 ? drafts.tail : 0;
          keys.branch_slots = fb_.out_cache_loc.data() + static_cast<size_t>(i * fb_.topk + t) * fb_.draft_steps;
        }
        const int64_t end = s + fb_.draft_step + 1;
        csr.append_row(d, keys, decode_begin(l, end), end);
        d.add_queries(1);
      }
    }
    return d;
  }

  // TARGET_VERIFY: the CSR covers prefix + D drafts (generate_attn_arg_prefill, kv_lens = s + D)
  // and every column is read through the custom mask. Window and chunked layers start the CSR at
  // the root's lowest visible key and fold the window/chunk into the mask by position (sglang
  // passes window_left, which counts columns, not tree positions; the mask is the correct form).
  WrapperDraft verify_call(const Layer& l, const CsrWriter& csr) const {
    WrapperDraft d;
    d.role = Role::verify;
    d.causal = false;
    d.has_mask = true;
    const int64_t D = fb_.draft_tokens;
    int64_t tree_offset = 0;  // start of row i in the batch's flat tree mask
    for (int32_t i = 0; i < fb_.padded_bs; ++i) {
      const int64_t s = fb_.seq_lens[static_cast<size_t>(i)];
      const int64_t end = s + D;
      const int64_t first = csr.append_row(d, CsrRowKeys{req_row(i)}, lowest_position(l, s), end);
      const int64_t kv_len = end - first;
      const int32_t* pos = fb_.positions.data() + static_cast<size_t>(i) * D;
      for (int64_t r = 0; r < D; ++r) {
        const int64_t lo = lowest_position(l, pos[r]);
        const uint8_t* tree = fb_.custom_mask.data() + tree_offset + r * (s + D);
        for (int64_t c = first; c < end; ++c) {
          const int64_t key_position = c < s ? c : pos[c - s];
          d.custom_mask.push_back(tree[c] != 0 && key_position >= lo ? 1 : 0);
        }
      }
      d.mask_indptr.push_back(static_cast<int32_t>(d.mask_indptr.back() + D * kv_len));
      d.add_queries(D);
      tree_offset += D * (s + D);
    }
    return d;
  }

  // Ragged EXTEND, part 1: the new tokens attend each other from the batch's k/v, causal
  // (window layers: window_left = W, positions are consecutive). Chunked layers: FlashInfer in
  // sglang has no chunked-local path; the natural form is a custom mask, causal and in-chunk.
  WrapperDraft ragged_call(const Layer& l) const {
    WrapperDraft d = causal_call(Role::ragged, l);
    for (int32_t i = 0; i < fb_.padded_bs; ++i) {
      const int64_t ext = fb_.extend_lens[static_cast<size_t>(i)];
      const int64_t prefix = fb_.prefix_lens[static_cast<size_t>(i)];
      d.kv_indptr.push_back(static_cast<int32_t>(d.kv_indptr.back() + ext));
      if (d.has_mask) append_chunk_mask(d, l, prefix, ext, prefix, ext);
      d.add_queries(ext);
    }
    return d;
  }

  // Ragged EXTEND, part 2: every new token attends the cached prefix, non-causal. Window layers
  // keep the last min(prefix, W) prefix keys plus a mask k >= q - W (sglang
  // _build_swa_prefix_custom_mask, built only when some entry is false); chunked layers start at
  // the first query's chunk with the same kind of mask.
  WrapperDraft prefix_call(const Layer& l, const CsrWriter& csr) const {
    WrapperDraft d;
    d.role = Role::prefix;
    d.causal = false;
    bool any_masked = false;
    for (int32_t i = 0; i < fb_.padded_bs; ++i) {
      const int64_t ext = fb_.extend_lens[static_cast<size_t>(i)];
      const int64_t prefix = fb_.prefix_lens[static_cast<size_t>(i)];
      const int64_t begin = lowest_position(l, prefix);
      const int64_t first = csr.append_row(d, CsrRowKeys{req_row(i)}, begin, prefix);
      const int64_t kv_len = begin < prefix ? prefix - first : 0;
      for (int64_t j = 0; j < ext; ++j) {
        const int64_t lo = lowest_position(l, prefix + j);
        for (int64_t k = 0; k < kv_len; ++k) {
          const bool keep = first + k >= lo;
          any_masked = any_masked || !keep;
          d.custom_mask.push_back(keep ? 1 : 0);
        }
      }
      d.mask_indptr.push_back(static_cast<int32_t>(d.mask_indptr.back() + ext * kv_len));
      d.add_queries(ext);
    }
    d.has_mask = any_masked;
    if (!any_masked) {
      d.custom_mask.clear();
      d.mask_indptr.assign(1, 0);
    }
    return d;
  }

  // Paged EXTEND over the whole sequence, causal (CUDA-graph extend, DRAFT_EXTEND_V2 whose
  // seq_lens already count the new tokens). Window layers: keys from prefix - W, window_left W
  // (sglang: min(seq_len, W + extend_len) keys); chunked layers: from the first query's chunk,
  // with a causal in-chunk mask.
  WrapperDraft full_extend_call(const Layer& l, const CsrWriter& csr) const {
    WrapperDraft d = causal_call(Role::full_extend, l);
    for (int32_t i = 0; i < fb_.padded_bs; ++i) {
      const int64_t end = fb_.seq_lens[static_cast<size_t>(i)];
      const int64_t ext = fb_.extend_lens[static_cast<size_t>(i)];
      const int64_t first_query = end - ext;  // negative on padded rows with more tokens than keys
      const int64_t begin = lowest_position(l, std::max<int64_t>(0, first_query));
      const int64_t first = csr.append_row(d, CsrRowKeys{req_row(i)}, begin, end);
      if (d.has_mask) append_chunk_mask(d, l, first_query, ext, first, begin < end ? end - first : 0);
      d.add_queries(ext);
    }
    return d;
  }

  // A causal call over consecutive positions: window layers pass window_left = W; chunked layers
  // (no FlashInfer path in sglang) get a custom mask instead, causal and in-chunk.
  static WrapperDraft causal_call(Role role, const Layer& l) {
    WrapperDraft d;
    d.role = role;
    d.window_left = l.kind == LayerKind::sliding_window ? l.window : -1;
    d.has_mask = l.kind == LayerKind::chunked;
    d.causal = !d.has_mask;
    return d;
  }

  // That mask for one row: q_len queries from position first_query over kv_len keys from position
  // first_key; a key is kept iff it is at most the query's position and in the query's chunk.
  static void append_chunk_mask(WrapperDraft& d, const Layer& l, int64_t first_query, int64_t q_len,
                                int64_t first_key, int64_t kv_len) {
    for (int64_t j = 0; j < q_len; ++j) {
      const int64_t q = first_query + j;
      const int64_t lo = lowest_position(l, q);
      for (int64_t k = first_key; k < first_key + kv_len; ++k) d.custom_mask.push_back(k <= q && k >= lo ? 1 : 0);
    }
    d.mask_indptr.push_back(static_cast<int32_t>(d.mask_indptr.back() + q_len * kv_len));
  }

  const PlanInput& in_;
  const ForwardBatch& fb_;
  int32_t ps_;
  bool paged_;
};

}  // namespace

std::string to_string(Role r) {
  switch (r) {
    case Role::decode: return "decode";
    case Role::draft: return "draft";
    case Role::verify: return "verify";
    case Role::prefix: return "prefix";
    case Role::ragged: return "ragged";
    case Role::full_extend: return "extend";
  }
  return "?";
}

std::unique_ptr<FlashInferPlan> plan_flashinfer(const PlanInput& in, bool paged) {
  refuse_unplanned_mode(in.batch, "flashinfer");
  return Planner(in, paged).run();
}

}  // namespace kvfuzz::flashinfer
