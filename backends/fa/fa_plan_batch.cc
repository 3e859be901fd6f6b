// The page_table family's batching (families.h BatchCase): independent cases of one shape as one
// flash_attn_with_kvcache call per part. Each part's rows are the cases' rows in order; a row's
// query tokens move by its case's token offset, its page ids by its case's pool offset (in pages
// of the call's view), and cache_seqlens are kept, so every row reads exactly the keys it read
// alone, in the batch's pool. cu_seqlens_k is rebuilt as the prefix sums of the rows' keys.
//
// Batched only where that is exact: every part's rows hold every token of the case, in order
// (cu_seqlens_q from 0 to num_tokens), no cascade over a common prefix (its one row spans the
// batch), and each group reads one pool.
#include <algorithm>

#include "backends/contract/batch_merge.h"
#include "backends/fa/fa_plan.h"

namespace kvfuzz::fa {
namespace {

// The groups of a plan in a fixed order: full, sliding, local[0..].
std::vector<const FaGroup*> groups(const FaPlan& p) {
  std::vector<const FaGroup*> g{&p.full, &p.sliding};
  for (const FaGroup& l : p.local) g.push_back(&l);
  return g;
}

// The pool the layers reading `g` use: "full", "swa", "none" (no layer reads it) or "mixed".
std::string group_pool(const FaPlan& p, const Scenario& s, const FaGroup* g) {
  return batch::pool_of_layers(s, [&](int32_t l) { return &p.group_of(l) == g; });
}

FaCall merge_call(const std::vector<const FaCall*>& calls, const std::vector<BatchCase>& cases, bool swa) {
  const FaCall& first = *calls.front();
  FaCall m;
  m.name = first.name;
  m.view_page_size = first.view_page_size;
  m.causal = first.causal;
  m.empty_padded_rows = first.empty_padded_rows;
  m.max_seqlen_k_upper_bound = first.max_seqlen_k_upper_bound;
  m.sinks = first.sinks;  // every case's (batch_shape)
  for (const FaCall* c : calls) {
    m.rows += c->rows;
    m.width = std::max(m.width, c->width);
    m.max_seqlen_q = std::max(m.max_seqlen_q, c->max_seqlen_q);
    m.max_seqlen_k = std::max(m.max_seqlen_k, c->max_seqlen_k);
  }
  m.cu_seqlens_q = Buffer<int32_t>(first.cu_seqlens_q.name(), m.rows + 1);
  m.cu_seqlens_k = Buffer<int32_t>(first.cu_seqlens_k.name(), m.rows + 1);
  m.cache_seqlens = Buffer<int32_t>(first.cache_seqlens.name(), m.rows);
  m.page_table = Buffer<int32_t>(first.page_table.name(), int64_t{m.rows} * m.width);
  const std::vector<int64_t> pages =
      batch::page_offsets(cases, swa ? PoolKind::swa : PoolKind::full, first.view_page_size);
  int32_t r = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    const FaCall& c = *calls[i];
    const auto tokens = static_cast<int32_t>(cases[i].token_offset);
    for (int32_t b = 0; b < c.rows; ++b, ++r) {
      m.cu_seqlens_q.set(r + 1, tokens + c.cu_seqlens_q[b + 1]);
      m.cu_seqlens_k.set(r + 1, m.cu_seqlens_k[r] + c.cu_seqlens_k[b + 1] - c.cu_seqlens_k[b]);
      m.cache_seqlens.set(r, c.cache_seqlens[b]);
      batch::copy_table_row(m.page_table, int64_t{r} * m.width, m.width, c.page_table, int64_t{b} * c.width, c.width,
                            pages[i]);
    }
  }
  return m;
}

}  // namespace

std::string batch_shape(const BatchCase& c) {
  const auto& p = dynamic_cast<const FaPlan&>(*c.plan);
  if (!p.descales.empty()) return "";  // fp8 descales are per call row: not merged
  std::string shape = p.has_sliding ? "sliding" : "no-sliding";
  for (const Layer& l : p.layers) shape += " " + batch::layer_shape(l);
  for (const FaGroup* g : groups(p)) {
    const std::string pool = group_pool(p, *c.scenario, g);
    if (pool == "mixed" || g->common_prefix_len > 0 || g->dcp_world > 1) return "";
    shape += " | " + std::to_string(static_cast<int>(g->kind)) + " chunk " + std::to_string(g->chunk) + " " + pool;
    for (const FaCall& call : g->parts) {
      if (call.cu_seqlens_q[0] != 0 || call.cu_seqlens_q[call.rows] != c.num_tokens) return "";
      shape += " [vps " + std::to_string(call.view_page_size) + (call.causal ? " causal" : "") +
               (call.empty_padded_rows ? " empty-padded" : "") + (call.max_seqlen_k_upper_bound ? " k-bound" : "") +
               batch::sinks_shape(call.sinks) + "]";
    }
  }
  return shape;
}

std::unique_ptr<Plan> merge_plans(const std::vector<BatchCase>& cases) {
  std::vector<const FaPlan*> plans;
  for (const BatchCase& c : cases) plans.push_back(&dynamic_cast<const FaPlan&>(*c.plan));
  const FaPlan& first = *plans.front();
  auto m = std::make_unique<FaPlan>();
  m->layers = first.layers;
  m->has_sliding = first.has_sliding;
  m->local.resize(first.local.size());
  std::vector<FaGroup*> out{&m->full, &m->sliding};
  for (FaGroup& g : m->local) out.push_back(&g);
  const std::vector<const FaGroup*> first_groups = groups(first);
  for (size_t gi = 0; gi < out.size(); ++gi) {
    const FaGroup& g0 = *first_groups[gi];
    const bool swa = group_pool(first, *cases.front().scenario, &g0) == "swa";
    out[gi]->kind = g0.kind;
    out[gi]->chunk = g0.chunk;
    for (size_t j = 0; j < g0.parts.size(); ++j) {
      std::vector<const FaCall*> calls;
      for (const FaPlan* p : plans) calls.push_back(&groups(*p)[gi]->parts[j]);
      out[gi]->parts.push_back(merge_call(calls, cases, swa));
    }
  }
  return m;
}

}  // namespace kvfuzz::fa
