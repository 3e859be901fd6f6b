#include "reference/forward_batch.h"

#include <algorithm>

#include "reference/case_error.h"
#include "reference/draft_layout.h"

namespace kvfuzz {
namespace {

[[noreturn]] void fail_entry(size_t i, const std::string& what) {
  throw InvalidCase("batch.entries[" + std::to_string(i) + "]: " + what);
}

// Query tokens of each row of the mode (padded rows get the same count as production pads).
int32_t tokens_of(const Batch& b, const BatchEntry& e) {
  switch (b.mode) {
    case Mode::idle:
    case Mode::decode: return 1;
    case Mode::extend:
    case Mode::mixed:
    case Mode::draft_extend_v2: return e.extend_len;
    case Mode::target_verify: return b.draft_tokens;
    case Mode::draft_decode: return b.topk;
    case Mode::draft_q_only:
      return 1;
  }
  return 1;
}

void check_context(const CacheConfig& c, size_t i, int64_t end) {
  if (end > c.max_context_len)
    fail_entry(i, "the step reaches " + std::to_string(end) + " columns, over cache.max_context_len = " +
                      std::to_string(c.max_context_len));
}

}  // namespace

Prepared prepare(const Scenario& s) {
  const CacheConfig& cfg = s.cache;
  const Batch& b = s.batch;
  CacheModel model(cfg, cfg.swa_pages > 0);
  const int32_t window = max_window(s.model);
  for (size_t i = 0; i < s.history.size(); ++i) model.apply(s.history[i], window, i);
  for (const auto& [id, r] : model.state().requests) {
    if (!r.draft_parents.empty())
      throw InvalidCase("history: request " + std::to_string(id) + " ends with pending drafts (a draft op needs its accept)");
  }

  ForwardBatch fb;
  fb.mode = b.mode;
  fb.bs = static_cast<int32_t>(b.entries.size());
  fb.padded_bs = std::max(fb.bs, b.graph_bs);
  fb.captured = b.graph_bs > 0;
  fb.page_size = cfg.page_size;
  fb.topk = b.topk;
  fb.draft_tokens = b.draft_tokens;
  fb.draft_steps = b.draft_steps;
  fb.draft_step = b.draft_step;
  fb.kv_splits = b.kv_splits;
  fb.device_sms = b.device_sms;

  // Allocate the step's new tokens for all rows at once, in batch order.
  std::vector<Append> appends;
  std::vector<DraftLayout> layouts;
  for (size_t i = 0; i < b.entries.size(); ++i) {
    const BatchEntry& e = b.entries[i];
    auto it = model.state().requests.find(e.request);
    if (it == model.state().requests.end())
      fail_entry(i, "request " + std::to_string(e.request) + " is not live after the history");
    const int32_t seq_len = it->second.seq_len;
    const bool needs_prefix = b.mode == Mode::decode || b.mode == Mode::target_verify || is_drafting_step(b.mode);
    if (needs_prefix && seq_len == 0)
      fail_entry(i, "request " + std::to_string(e.request) + " has no tokens; " + to_string(b.mode) +
                        " needs a prefilled request");
    if (b.mode == Mode::draft_decode) {
      layouts.push_back(draft_layout(seq_len, cfg.page_size, b.topk, b.draft_steps));
      check_context(cfg, i, layouts.back().end_column());
      appends.push_back({e.request, seq_len, layouts.back().end_column() - seq_len});
    } else if (b.mode == Mode::draft_q_only) {  // its query is the last committed token's: nothing new
      // The drafter runs in its target step's engine step, before the scheduler frees the pages the
      // next step's window has left (vLLM's remove_skipped_blocks, at the next schedule): the window of
      // position seq_len - 1 is still held, so no eviction can have freed below it.
      const int32_t lowest = std::max(0, seq_len - 1 - max_window(s.model));
      if (it->second.swa_evicted > lowest)
        fail_entry(i, "request " + std::to_string(e.request) + "'s SWA pages below column " +
                          std::to_string(it->second.swa_evicted) +
                          " were evicted, but its draft_q_only step at position " + std::to_string(seq_len - 1) +
                          " reads from column " + std::to_string(lowest) +
                          ": a drafting step runs before its target step's pages are evicted");
      appends.push_back({e.request, seq_len, 0});
    } else {
      check_context(cfg, i, int64_t{seq_len} + tokens_of(b, e));
      appends.push_back({e.request, seq_len, tokens_of(b, e)});
    }
  }
  if (!model.append(appends))
    throw InvalidCase("batch: the KV pool cannot hold the step's new tokens (cache.full_pages = " +
                      std::to_string(cfg.full_pages) + ", cache.swa_pages = " + std::to_string(cfg.swa_pages) + ")");

  // Drafting: relabel the copied prefix tails and mark the steps not yet run as unwritten.
  for (size_t i = 0; i < layouts.size(); ++i) {
    const DraftLayout& l = layouts[i];
    const int32_t id = b.entries[i].request;
    const RequestState& r = model.state().requests.at(id);
    for (int32_t c = r.seq_len; c < l.end_column(); ++c)
      model.set_content(model.state().r2t(r.row, c), {id, -1, false});
    for (int32_t t = 0; t < b.topk; ++t) {
      for (int32_t o = 0; t > 0 && o < l.tail; ++o)  // branch 0's region holds the original tail
        model.set_content(model.state().r2t(r.row, l.tail_column(t, o)), {id, l.base + o, true});
      for (int32_t u = 0; u < b.draft_steps; ++u)
        model.set_content(model.state().r2t(r.row, l.column(t, u)), {id, l.logical_column(t, u), u <= b.draft_step});
    }
  }

  const CacheState& cache = model.state();
  for (int32_t i = 0; i < fb.padded_bs; ++i) {
    const bool real = i < fb.bs;
    const BatchEntry pad{};
    const BatchEntry& e = real ? b.entries[static_cast<size_t>(i)] : pad;
    const int32_t prefix = real ? cache.requests.at(e.request).seq_len : 1;
    const int32_t row = real ? cache.requests.at(e.request).row : 0;
    int32_t tokens = real ? tokens_of(b, e) : 1;
    if (!real && b.mode == Mode::draft_extend_v2) {
      tokens = 1;
      for (const BatchEntry& x : b.entries) tokens = std::max(tokens, x.extend_len);
    } else if (!real && b.mode != Mode::idle) {
      tokens = tokens_of(b, b.entries.front());
    }

    int32_t seq_len = prefix;  // target_verify, draft_decode: the verified prefix; draft_q_only: the keys it reads
    if (b.mode == Mode::decode || b.mode == Mode::idle || b.mode == Mode::extend || b.mode == Mode::mixed ||
        b.mode == Mode::draft_extend_v2)
      seq_len = prefix + tokens;
    fb.request_ids.push_back(real ? e.request : -1);
    fb.req_pool_indices.push_back(row);
    fb.seq_lens.push_back(real ? seq_len : 1);
    const bool prefix_is_seq = b.mode == Mode::target_verify || is_drafting_step(b.mode);
    fb.prefix_lens.push_back(real || prefix_is_seq ? prefix : std::max(0, 1 - tokens));
    fb.extend_lens.push_back(tokens);

    for (int32_t j = 0; j < tokens; ++j) {
      int32_t column = -1, position = 0;
      if (real) {
        switch (b.mode) {
          case Mode::target_verify:
            column = prefix + j;
            position = prefix + tree_depth(e.parents, j);
            break;
          case Mode::draft_decode:
            column = layouts[static_cast<size_t>(i)].logical_column(j, b.draft_step);
            position = prefix + b.draft_step;
            break;
          case Mode::draft_q_only:  // every step at the last committed token, which it does not write
            column = prefix - 1;
            position = prefix - 1;
            break;
          default:
            column = prefix + j;
            position = prefix + j;
        }
      }
      fb.token_columns.push_back(column);
      fb.positions.push_back(position);
      if (!is_drafting_step(b.mode)) fb.out_cache_loc.push_back(real ? cache.r2t(row, prefix + j) : 0);
    }
    if (b.mode == Mode::draft_decode) {
      for (int32_t t = 0; t < b.topk; ++t) {
        for (int32_t u = 0; u < b.draft_steps; ++u) {
          fb.out_cache_loc.push_back(real ? cache.r2t(row, layouts[static_cast<size_t>(i)].column(t, u)) : 0);
        }
      }
    }
    if (b.mode == Mode::target_verify) {
      // Padded rows get a chain: their output is discarded, the shape must still hold.
      std::vector<int32_t> chain(static_cast<size_t>(b.draft_tokens));
      for (int32_t d = 0; d < b.draft_tokens; ++d) chain[static_cast<size_t>(d)] = d - 1;
      const std::vector<int32_t>& parents = real ? e.parents : chain;
      const int32_t width = fb.seq_lens.back() + b.draft_tokens;
      for (int32_t r = 0; r < b.draft_tokens; ++r) {
        std::vector<uint8_t> line(static_cast<size_t>(width), 0);
        std::fill(line.begin(), line.begin() + fb.seq_lens.back(), uint8_t{1});
        for (int32_t n = r; n >= 0; n = parents[static_cast<size_t>(n)])
          line[static_cast<size_t>(fb.seq_lens.back() + n)] = 1;
        fb.custom_mask.insert(fb.custom_mask.end(), line.begin(), line.end());
      }
    }
  }
  for (int32_t x : fb.seq_lens) fb.seq_lens_sum += x;
  return {std::move(model.state()), std::move(fb)};
}

}  // namespace kvfuzz
