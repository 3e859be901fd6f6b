// The fa planner's entry point and its paged path (sglang flashattention_backend.py
// init_forward_metadata; SEMANTICS.md §4): one causal flash_attn_with_kvcache call whose page
// table is req_to_token[r, :max_seq_len_k] strided and divided (`[:, arange(0, n, ps)] // ps`),
// plus the SWA pool's table and the chunked layers' virtual batches. See fa_planner.h.
#include "backends/fa/fa_planner.h"

#include <algorithm>
#include <set>

#include "backends/common/planned_modes.h"
#include "backends/fa/fa_faults.h"
#include "backends/fa/fa_local.h"
#include "backends/fa/fa_tables.h"

namespace kvfuzz::fa {

PlanScope::PlanScope(const PlanInput& input)
    : in(input),
      fb(input.batch),
      cache(input.cache),
      ps(input.batch.page_size),
      rows(input.batch.padded_bs),
      ctx(input.cache.config.max_context_len),
      graph(input.batch.graph()),
      hybrid(input.cache.hybrid),
      mode(to_string(input.batch.mode)) {
  std::set<int32_t> chunk_set;
  for (const Layer& l : input.scenario.model.layers) {
    if (l.kind == LayerKind::sliding_window) sliding_layers = true;
    if (l.kind == LayerKind::chunked) chunk_set.insert(l.chunk);
  }
  chunks.assign(chunk_set.begin(), chunk_set.end());
  q_offsets.push_back(0);
  for (int32_t b = 0; b < rows; ++b) q_offsets.push_back(q_offsets.back() + fb.extend_lens[static_cast<size_t>(b)]);
}

int32_t PlanScope::max_seq_len() const {
  int32_t m = 0;
  for (int32_t b = 0; b < rows; ++b) m = std::max(m, seq_len(b));
  return m;
}

std::unique_ptr<FaPlan> plan_fa(const PlanInput& in) {
  refuse_unplanned_mode(in.batch, "fa");
  auto plan = std::make_unique<FaPlan>();
  plan->layers = in.scenario.model.layers;
  plan->full.kind = GroupKind::full;
  plan->sliding.kind = GroupKind::sliding;
  const PlanScope sc(in);
  const bool tree = in.batch.topk > 1;
  if (in.batch.mode == Mode::target_verify && tree)
    plan_verify_tree(sc, *plan);
  else if (in.batch.mode == Mode::draft_decode && tree)
    plan_draft_tree(sc, *plan);
  else
    plan_paged(sc, *plan);
  attach_sinks(in, *plan);
  return plan;
}

void attach_sinks(const PlanInput& in, FaPlan& plan) {
  const std::vector<double>& sinks = in.scenario.model.sinks;
  if (sinks.empty()) return;
  const bool every_part = in.fault(kFaultSinkEveryPart);
  auto attach = [&](FaGroup& g) {
    for (size_t i = 0; i < g.parts.size(); ++i)
      if (i == 0 || every_part) g.parts[i].sinks = sinks;
  };
  attach(plan.full);
  attach(plan.sliding);
  for (FaGroup& g : plan.local) attach(g);
}

FaCall topk_normal_call(const PlanScope& sc, const std::string& name, int32_t q_per_row,
                        const std::vector<int32_t>& k_lens) {
  const int32_t pages = ceil_div(std::min(sc.max_seq_len(), sc.ctx), sc.ps);
  const int32_t width = sc.graph ? sc.ctx : pages;  // topk_normal.page_table [max_bs, context_len]
  FaCall c = make_call(name + "_normal", name + "_normal.page_table", sc.rows, width, sc.ps, /*causal=*/false);
  for (int32_t b = 0; b < sc.rows; ++b) {
    set_row(c, b, sc.q_offsets[static_cast<size_t>(b)], q_per_row, k_lens[static_cast<size_t>(b)]);
    fill_page_row(c.page_table, int64_t{b} * width, sc.cache, sc.r2t_row(b), pages, sc.ps, SlotSpace::full);
  }
  finish_call(c, sc.rows);
  return c;
}

void add_local_groups(const PlanScope& sc, FaPlan& plan, const FaCall& base, const Buffer<int32_t>& table,
                      int32_t table_width, int32_t page_size, int64_t base_row_capacity) {
  for (int32_t chunk : sc.chunks) {
    LocalOptions opt;
    opt.graph = sc.graph;
    opt.max_context_len = sc.ctx;
    opt.shrink_chunk = sc.in.fault(kFaultLocalChunkShrink);
    opt.name = sc.mode + ".local" + std::to_string(chunk);
    FaGroup g;
    g.kind = GroupKind::local;
    g.chunk = chunk;
    g.parts.push_back(make_local_attention({base, table, table_width, page_size, base_row_capacity}, chunk, opt));
    plan.local.push_back(std::move(g));
  }
}

namespace {

// The local groups split the full call's rows (FaGroup::splits_full).
void mark_split_of_full(FaPlan& plan) {
  for (FaGroup& g : plan.local) g.splits_full = true;
}

// Keys each row reads (cache_seqlens) in the paged modes (SEMANTICS.md §2 table, §4).
int32_t paged_extent(const PlanScope& sc, int32_t b) {
  const ForwardBatch& fb = sc.fb;
  const int32_t s = sc.seq_len(b);
  switch (fb.mode) {
    case Mode::target_verify:
      return s + fb.draft_tokens;  // topk = 1: the chain after the prefix
    case Mode::draft_decode:
      return s + fb.draft_step + 1;  // topk = 1: drafts sit in R2T after s
    case Mode::draft_extend_v2:
      // seq_lens already counts the extend ("forward sees post-write length").
      if (sc.in.fault(kFaultDraftExtendDouble)) return s + fb.extend_lens[static_cast<size_t>(b)];
      if (sc.in.fault(kFaultDraftExtendPrefix)) return fb.prefix_lens[static_cast<size_t>(b)];
      return s;
    default:
      return s;  // decode, extend, mixed, idle
  }
}

}  // namespace

void plan_paged(const PlanScope& sc, FaPlan& plan) {
  const ForwardBatch& fb = sc.fb;
  const int32_t ps = sc.ps;
  std::vector<int32_t> k_lens(static_cast<size_t>(sc.rows));
  int32_t max_k = 0;
  for (int32_t b = 0; b < sc.rows; ++b) {
    k_lens[static_cast<size_t>(b)] = paged_extent(sc, b);
    max_k = std::max(max_k, k_lens[static_cast<size_t>(b)]);
  }
  // R2T[r, :max_seq_len_k] (a slice: clipped to the row's width), then strided and divided.
  const int32_t columns = std::min(max_k, sc.ctx);
  const int32_t pages = ceil_div(columns, ps);
  // CUDA graph: [max_bs, ceil(context_len / ps)] allocated at capture; replay fills [:, :pages].
  const int32_t width = sc.graph ? ceil_div(sc.ctx, ps) : pages;

  auto build = [&](const std::string& name, const std::string& table_name, SlotSpace space) {
    FaCall c = make_call(name, table_name, sc.rows, width, ps, /*causal=*/true);
    for (int32_t b = 0; b < sc.rows; ++b) {
      set_row(c, b, sc.q_offsets[static_cast<size_t>(b)], fb.extend_lens[static_cast<size_t>(b)],
              k_lens[static_cast<size_t>(b)]);
      fill_page_row(c.page_table, int64_t{b} * width, sc.cache, sc.r2t_row(b), pages, ps, space);
    }
    finish_call(c, sc.rows);
    return c;
  };
  plan.full.parts.push_back(build(sc.mode, sc.mode + ".page_table", SlotSpace::full));
  if (sc.hybrid && sc.sliding_layers) {
    plan.has_sliding = true;
    const SlotSpace space = sc.in.fault(kFaultSwaPageIdTranslate) ? SlotSpace::swa_page_ids : SlotSpace::swa;
    plan.sliding.parts.push_back(build(sc.mode + ".swa", sc.mode + ".swa_page_table", space));
  }
  if (sc.chunks.empty()) return;

  // Chunked layers. Production builds local metadata only for DECODE, EXTEND and eager verify
  // with topk = 1 (flashattention_backend.py, local_attn_metadata) and falls back to full attention elsewhere; MIXED,
  // DRAFT_EXTEND_V2, draft decode and CUDA-graph verify get the same natural virtual batches
  // here, so that chunked layers stay exact in every mode.
  const FaCall& base = plan.full.parts.front();
  if (sc.in.fault(kFaultLocalTokenTable) && ps > 1) {
    // #23757 / #32902: the eager helper runs before the stride/divide step and slices the
    // token-granular R2T rows with the page size (switched on for replay batches too).
    const int32_t token_width = sc.graph ? sc.ctx : columns;
    Buffer<int32_t> tokens(sc.mode + ".page_table(token-granular)", int64_t{sc.rows} * token_width);
    for (int32_t b = 0; b < sc.rows; ++b)
      for (int32_t c = 0; c < columns; ++c) tokens.set(int64_t{b} * token_width + c, sc.cache.r2t(sc.r2t_row(b), c));
    add_local_groups(sc, plan, base, tokens, token_width, ps, sc.rows);
    mark_split_of_full(plan);
    return;
  }
  add_local_groups(sc, plan, base, base.page_table, base.width, ps, sc.rows);
  mark_split_of_full(plan);
}

}  // namespace kvfuzz::fa
