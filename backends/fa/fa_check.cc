// FaPlan::check_metadata: every call of every layer's group against expected_parts
// (fa_expected.h) — query ranges, cache_seqlens == written extent, cu_seqlens_k prefix sums,
// maxima, the view page size, and key by key through the stride/divide invariant (drafting-layout
// keys at the req_to_token columns that hold them); padded CUDA-graph rows must stay in the dummy
// page 0; a cascade's prefix row must hold, for every batch row, that row's first columns; the
// full call's lengths that chunked layers split, also where no layer reads the full call.
#include <algorithm>
#include <optional>

#include "backends/fa/fa_expected.h"
#include "backends/fa/fa_plan.h"

namespace kvfuzz::fa {
namespace {

std::string entry(const Buffer<int32_t>& b, int64_t i) { return b.name() + "[" + std::to_string(i) + "]"; }

struct CallChecker {
  MetadataChecker& check;
  const FaCall& call;
  int32_t layer;
  const std::vector<int32_t>& rows_of_tokens;  // [num_tokens]
  int32_t rank = -1;                           // the rank whose pool the call reads (ExpectedPart::rank)

  // Every finding of a call names its layer (the fingerprint's layer kind).
  void fail(std::string message) { check.fail(std::move(message), layer); }
  void equal(const std::string& what, int64_t got, int64_t want) { check.equal(what, got, want, layer); }

  // Slot of key k of kernel row v through the call's view; nothing (reported) outside the table.
  std::optional<int64_t> slot(int32_t v, int64_t k) {
    const int64_t index = int64_t{v} * call.width + k / call.view_page_size;
    if (index < 0 || index >= call.page_table.capacity()) {
      fail(call.name + ": key " + std::to_string(k) + " of kernel row " + std::to_string(v) + " needs " +
                 entry(call.page_table, index) + ", outside its capacity " +
                 std::to_string(call.page_table.capacity()));
      return std::nullopt;
    }
    return int64_t{call.page_table[index]} * call.view_page_size + k % call.view_page_size;
  }

  void padded_row(int32_t v, int32_t row) {
    const int32_t ps = check.batch().page_size;
    for (int64_t k = 0; k < call.cache_seqlens[v]; ++k) {
      const std::optional<int64_t> s = slot(v, k);
      if (!s) return;
      if (*s < 0 || *s >= ps) {
        fail(call.name + ": padded row " + std::to_string(row) + " (kernel row " + std::to_string(v) + ") key " +
                   std::to_string(k) + " resolves to slot " + std::to_string(*s) + ", outside the dummy page 0");
        return;
      }
    }
  }

  // Kernel row v's query tokens and keys.
  void lengths(int32_t v, const ExpectedRow& want) {
    const std::string at = std::string(1, '[').append(std::to_string(v)).append("]");
    equal(call.name + ": query tokens of kernel row " + std::to_string(v), call.q_len(v), want.q_len);
    equal(call.cache_seqlens.name() + at + " (batch row " + std::to_string(want.batch_row) + ")",
                call.cache_seqlens[v], want.k_len());
  }

  void real_row(int32_t v, const ExpectedRow& want) {
    lengths(v, want);
    // Stride/divide through the view the kernel reads with (call.view_page_size), also when it is
    // not the expected one: the general property must catch a wrong view, not only run()'s check.
    if (want.k_len() == 0) return;
    const int64_t off = int64_t{v} * call.width;
    if (off + (want.k_len() - 1) / call.view_page_size >= call.page_table.capacity() || call.width <= 0) {
      fail(call.name + ": kernel row " + std::to_string(v) + " needs " + std::to_string(want.k_len()) +
                 " keys, past the end of " + call.page_table.name() + " (capacity " +
                 std::to_string(call.page_table.capacity()) + ", width " + std::to_string(call.width) + ")");
      return;
    }
    if (want.run > 0)
      check.page_table_row(call.page_table, off, call.view_page_size, layer, want.batch_row, want.first_column,
                           want.run);
    int32_t k = want.run;
    if (rank >= 0) {  // decode-context parallelism: through the rank's pool (rank_slots)
      for (const ExpectedKey& key : want.keys)
        check.gathered_key(call.page_table, off, call.view_page_size, call.rank_slots, k++, layer, want.batch_row,
                           key.column);
      return;
    }
    for (const ExpectedKey& key : want.keys)
      check.page_table_key(call.page_table, off, call.view_page_size, k++, layer, want.batch_row, key.column,
                           key.r2t_column);
  }

  // A cascade's prefix part: one kernel row of every real query reading the common prefix, whose
  // keys must be each batch row's own first columns (stride/divide row by row): a prefix that is
  // not shared, or longer than what is shared, reads another request's keys for some row.
  void shared_row(const ExpectedPart& part) {
    if (call.rows != 1) {
      fail(call.name + ": a cascade's prefix runs as one kernel row, not " + std::to_string(call.rows));
      return;
    }
    const int32_t k_len = part.rows.empty() ? 0 : part.rows.front().run;
    equal(call.cache_seqlens.name() + "[0] (the common prefix)", call.cache_seqlens[0], k_len);
    if (k_len == 0) return;
    if ((k_len - 1) / call.view_page_size >= call.page_table.capacity() || call.width <= 0) {
      fail(call.name + ": the common prefix of " + std::to_string(k_len) + " keys is past the end of " +
           call.page_table.name() + " (capacity " + std::to_string(call.page_table.capacity()) + ")");
      return;
    }
    for (const ExpectedRow& r : part.rows)
      check.page_table_row(call.page_table, 0, call.view_page_size, layer, r.batch_row, r.first_column, r.run);
  }

  void run(const ExpectedPart& part) {
    const ForwardBatch& fb = check.batch();
    if (call.view_page_size != part.view_page_size)
      fail(call.name + ".page_table holds " + (part.view_page_size == 1 ? "token slots" : "page ids") +
                 " but is read with K/V view page size " + std::to_string(call.view_page_size) + " (expected " +
                 std::to_string(part.view_page_size) + ")");
    if (call.causal != part.causal) fail(call.name + ": causal flag is " + std::to_string(call.causal));
    rank = part.rank;
    if ((part.rank >= 0) != (call.rank_slots.capacity() > 0)) {
      fail(call.name +
           (part.rank >= 0 ? ": reads no rank's pool (no rank_slots), expected rank " + std::to_string(part.rank) + "'s"
                           : ": reads a rank's pool (rank_slots), expected the layer's"));
      return;
    }
    if (call.rows < 0 || call.rows >= call.cu_seqlens_q.capacity() || call.rows > call.cache_seqlens.capacity()) {
      fail(call.name + ": " + std::to_string(call.rows) + " kernel rows do not fit its buffers");
      return;
    }
    equal(call.cu_seqlens_q.name() + "[0]", call.cu_seqlens_q[0], 0);
    // With empty padded rows the kernel's queries are the real rows' tokens, which come first.
    int64_t queries = fb.num_tokens();
    if (call.empty_padded_rows)
      queries = std::count_if(rows_of_tokens.begin(), rows_of_tokens.end(), [&](int32_t r) { return r < fb.bs; });
    equal(call.cu_seqlens_q.name() + "[" + std::to_string(call.rows) + "] (tokens)", call.cu_seqlens_q[call.rows],
                queries);
    std::vector<int64_t> k_lens;
    int32_t max_q = 0, max_k = 0;
    for (int32_t v = 0; v < call.rows; ++v) {
      k_lens.push_back(call.cache_seqlens[v]);
      max_q = std::max(max_q, call.q_len(v));
      max_k = std::max(max_k, call.cache_seqlens[v]);
    }
    check.prefix_sums(call.cu_seqlens_k, k_lens);
    equal(call.name + ".max_seqlen_q", call.max_seqlen_q, max_q);
    if (!call.max_seqlen_k_upper_bound) equal(call.name + ".max_seqlen_k", call.max_seqlen_k, max_k);
    else if (call.max_seqlen_k < max_k)
      fail(call.name + ".max_seqlen_k is " + std::to_string(call.max_seqlen_k) + ", below its rows' " +
                 std::to_string(max_k) + " keys (declared an upper bound)");

    if (part.shared_row) return shared_row(part);
    // Kernel rows belong to batch rows by their query tokens; real rows must match, in order.
    std::vector<std::vector<const ExpectedRow*>> pending(static_cast<size_t>(fb.bs));
    for (const ExpectedRow& r : part.rows) pending[static_cast<size_t>(r.batch_row)].push_back(&r);
    std::vector<size_t> next(static_cast<size_t>(fb.bs), 0);
    for (int32_t v = 0; v < call.rows; ++v) {
      const int32_t a = call.cu_seqlens_q[v], e = call.cu_seqlens_q[v + 1];
      if (call.empty_padded_rows && a == e && a == queries) {  // a padded row: nothing to read
        if (call.cache_seqlens[v] != 0)
          fail(call.name + ": empty padded kernel row " + std::to_string(v) + " reads " +
                     std::to_string(call.cache_seqlens[v]) + " keys");
        continue;
      }
      if (a < 0 || e > fb.num_tokens() || a >= e) {
        fail(call.name + ": kernel row " + std::to_string(v) + " has query tokens [" + std::to_string(a) + ", " +
                   std::to_string(e) + ") of " + std::to_string(fb.num_tokens()));
        continue;
      }
      const int32_t row = rows_of_tokens[static_cast<size_t>(a)];
      if (rows_of_tokens[static_cast<size_t>(e - 1)] != row) {
        fail(call.name + ": kernel row " + std::to_string(v) + " mixes the queries of batch rows " +
                   std::to_string(row) + " and " + std::to_string(rows_of_tokens[static_cast<size_t>(e - 1)]));
        continue;
      }
      if (row >= fb.bs) {
        padded_row(v, row);
        continue;
      }
      auto& queue = pending[static_cast<size_t>(row)];
      size_t& n = next[static_cast<size_t>(row)];
      if (n >= queue.size()) {
        fail(call.name + ": kernel row " + std::to_string(v) + " is one more row than batch row " +
                   std::to_string(row) + " needs (" + std::to_string(queue.size()) + ")");
        continue;
      }
      real_row(v, *queue[n++]);
    }
    for (int32_t b = 0; b < fb.bs; ++b) {
      if (next[static_cast<size_t>(b)] < pending[static_cast<size_t>(b)].size())
        fail(call.name + ": batch row " + std::to_string(b) + " gets " +
                   std::to_string(next[static_cast<size_t>(b)]) + " kernel rows, expected " +
                   std::to_string(pending[static_cast<size_t>(b)].size()));
    }
  }
};

// Chunked layers' virtual batches split the full call's rows: where no layer reads that call, its
// lengths are still what they derive from (sglang's _maybe_init_local_attn_metadata splits the
// metadata's cache_seqlens_int32 and cu_seqlens_q: flashattention_backend.py:2084-2093 in 0.5.10.post1, read), checked here under no layer, so that a
// wrong length is named once, as itself, and not only through the virtual batches it distorts
// (properties/root_cause.h then roots the chunked layers' findings in it).
void check_split_lengths(const FaPlan& plan, MetadataChecker& check, const std::vector<int32_t>& rows_of_tokens) {
  const ForwardBatch& fb = check.batch();
  bool read = false, split = false;
  for (int32_t layer = 0; layer < static_cast<int32_t>(plan.layers.size()); ++layer) {
    const FaGroup& g = plan.group_of(layer);
    read |= &g == &plan.full;
    split |= g.kind == GroupKind::local && g.splits_full;
  }
  if (read || !split || plan.full.parts.size() != 1 || plan.full.common_prefix_len > 0) return;
  const std::vector<ExpectedPart> want = expected_parts(fb, GroupKind::full, 0);
  if (want.size() != 1) return;
  const FaCall& base = plan.full.parts.front();
  CallChecker c{check, base, /*layer=*/-1, rows_of_tokens};
  for (const ExpectedRow& r : want.front().rows)  // one kernel row per batch row
    if (r.batch_row < base.rows && r.batch_row + 1 < base.cu_seqlens_q.capacity() &&
        r.batch_row < base.cache_seqlens.capacity())
      c.lengths(r.batch_row, r);
}

// Attention sinks: the model's, on exactly one of the group's merged parts (a query's softmax
// takes its sink once; each part's LSE carries what it was handed into the merge).
void check_sinks(MetadataChecker& check, const FaGroup& group, int32_t layer) {
  const std::vector<double>& model = check.scenario().model.sinks;
  int32_t with = 0;
  for (const FaCall& c : group.parts) {
    if (c.sinks.empty()) continue;
    ++with;
    if (c.sinks != model)
      check.fail("layer " + std::to_string(layer) + ": " + c.name + " is handed " + std::to_string(c.sinks.size()) +
                     " sink logits that are not the model's " + std::to_string(model.size()),
                 layer);
  }
  const int32_t want = model.empty() || group.parts.empty() ? 0 : 1;
  if (with != want)
    check.fail("layer " + std::to_string(layer) + ": attention sinks on " + std::to_string(with) + " of its " +
                   std::to_string(group.parts.size()) + " merged calls, expected " + std::to_string(want) +
                   (with > want ? " (the merge counts the sink " + std::to_string(with) + " times)" : ""),
               layer);
}

// Decode-context parallelism's layout: ranks that split the cache's pages into blocks of whole
// interleave runs, on full layers (the model kvfuzz checks; docs/vllm.md).
bool dcp_layout_fits(MetadataChecker& check, const FaGroup& group, int32_t layer) {
  const int32_t r = group.dcp_world, i = group.dcp_interleave, ps = check.batch().page_size;
  const bool full_layer = check.scenario().model.layers[static_cast<size_t>(layer)].kind == LayerKind::full;
  if (i >= 1 && ps % (r * i) == 0 && full_layer && group.kind == GroupKind::full && group.common_prefix_len == 0)
    return true;
  check.fail("layer " + std::to_string(layer) + ": decode-context parallelism over " + std::to_string(r) +
                 " ranks, interleave " + std::to_string(i) + ", page size " + std::to_string(ps) +
                 (full_layer ? "" : " on a layer that is not full attention") +
                 " (kvfuzz models it on full layers whose page size is a multiple of ranks x interleave)",
             layer);
  return false;
}

}  // namespace

void FaPlan::check_metadata(MetadataChecker& check) const {
  const ForwardBatch& fb = check.batch();
  const std::vector<int32_t> rows_of_tokens = token_rows(fb);
  for (int32_t layer = 0; layer < static_cast<int32_t>(layers.size()); ++layer) {
    const FaGroup& group = group_of(layer);
    const std::vector<ExpectedPart> want =
        group.dcp_world > 1 ? dcp_parts(fb, group.dcp_world, group.dcp_interleave, group.parts.size() > 1)
                            : expected_parts(fb, group.kind, group.chunk, group.common_prefix_len);
    if (group.dcp_world > 1 && !dcp_layout_fits(check, group, layer)) continue;
    for (int32_t b = 0; b < fb.bs && group.common_prefix_len > 0; ++b) {
      if (group.common_prefix_len > fb.prefix_lens[static_cast<size_t>(b)]) {
        check.fail("layer " + std::to_string(layer) + ": common_prefix_len " + std::to_string(group.common_prefix_len) +
                       " reaches past batch row " + std::to_string(b) + "'s cached prefix of " +
                       std::to_string(fb.prefix_lens[static_cast<size_t>(b)]) +
                       " (its queries would see the prefix's later keys)",
                   layer);
        break;
      }
    }
    // A batch of no query tokens may launch no kernel (sglang's forward_idle with no rows).
    if (fb.num_tokens() == 0 && group.parts.empty()) continue;
    if (want.size() != group.parts.size()) {
      check.fail("layer " + std::to_string(layer) + " runs " + std::to_string(group.parts.size()) +
                     " calls, expected " + std::to_string(want.size()),
                 layer);
      continue;
    }
    for (size_t p = 0; p < want.size(); ++p)
      CallChecker{check, group.parts[p], layer, rows_of_tokens}.run(want[p]);
    check_sinks(check, group, layer);
    std::vector<CallShape> calls;
    for (const FaCall& c : group.parts) calls.push_back({c.name, c.rows});
    check_descales(check, descales, layer, calls);
  }
  check_split_lengths(*this, check, rows_of_tokens);
}

}  // namespace kvfuzz::fa
