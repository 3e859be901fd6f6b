// Generation of the cache sizes, the allocator history and the batch. Part of generate.h.
//
// The history is driven through a CacheModel so that every op is possible when it is emitted:
// batch requests are admitted and grown among background requests that come and go, so pages are
// freed and reused and the SWA pool diverges from the full pool; an op the pools cannot serve
// frees a background request first.
#include <algorithm>

#include "reference/cache.h"
#include "reference/case_error.h"
#include "reference/generate.h"
#include "reference/limits.h"
#include "reference/shared_prefix.h"

namespace kvfuzz {
namespace {

// A random spec-decode tree: each node picks a parent among the nodes with room for a child.
// Deep trees prefer the newest node, wide ones the oldest.
std::vector<int32_t> generate_tree(Rng& rng, int32_t nodes, int32_t topk) {
  std::vector<int32_t> parents{-1};
  std::vector<int32_t> children(static_cast<size_t>(nodes), 0);
  const uint64_t shape = rng.below(3);  // 0 deep, 1 wide, 2 uniform
  for (int32_t i = 1; i < nodes; ++i) {
    int32_t p = 0;
    for (int tries = 0; tries < 64; ++tries) {
      if (topk == 1) p = i - 1;
      else if (shape == 0) p = std::max(0, i - 1 - static_cast<int32_t>(rng.below(2)));
      else if (shape == 1) p = static_cast<int32_t>(rng.below(static_cast<uint64_t>(std::min(i, 2))));
      else p = static_cast<int32_t>(rng.below(static_cast<uint64_t>(i)));
      if (children[static_cast<size_t>(p)] < topk) break;
    }
    while (children[static_cast<size_t>(p)] >= topk) ++p;  // a later node always has room
    ++children[static_cast<size_t>(p)];
    parents.push_back(p);
  }
  return parents;
}

// A root-to-node path of the tree, ending at a random node.
std::vector<int32_t> tree_path(Rng& rng, const std::vector<int32_t>& parents) {
  std::vector<int32_t> path;
  for (int32_t n = static_cast<int32_t>(rng.below(parents.size())); n >= 0; n = parents[static_cast<size_t>(n)])
    path.push_back(n);
  std::reverse(path.begin(), path.end());
  return path;
}

class HistoryBuilder {
 public:
  explicit HistoryBuilder(Scenario& s) : s_(s), model_(s.cache, s.cache.swa_pages > 0) {}

  // Tries an op; a pool that is short gets a background request freed first.
  bool emit(const Op& op) {
    for (int attempt = 0; attempt < 3; ++attempt) {
      try {
        model_.apply(op, max_window(s_.model), s_.history.size());
        s_.history.push_back(op);
        if (op.kind == OpKind::free) live_.erase(std::find(live_.begin(), live_.end(), op.request));
        if (op.kind == OpKind::admit) live_.push_back(op.request);
        return true;
      } catch (const InvalidCase&) {
        if (!free_background(op.request)) return false;
      }
    }
    return false;
  }

  bool free_background(int32_t keep) {
    for (int32_t id : live_) {
      if (id >= batch_requests_ && id != keep) return emit({OpKind::free, id, 0, {}, {}});
    }
    return false;
  }

  int32_t length(int32_t id) const {
    auto it = model_.state().requests.find(id);
    return it == model_.state().requests.end() ? -1 : it->second.seq_len;
  }
  bool is_live(int32_t id) const { return length(id) >= 0; }
  const std::vector<int32_t>& live() const { return live_; }
  const CacheModel& model() const { return model_; }
  void set_batch_requests(int32_t n) { batch_requests_ = n; }

 private:
  Scenario& s_;
  CacheModel model_;
  std::vector<int32_t> live_;
  int32_t batch_requests_ = 0;
};

Mode generate_mode(Rng& rng) {
  static constexpr Mode kModes[] = {Mode::decode,        Mode::decode,          Mode::extend,
                                    Mode::extend,        Mode::mixed,           Mode::target_verify,
                                    Mode::target_verify, Mode::draft_extend_v2, Mode::draft_decode,
                                    Mode::draft_decode,  Mode::idle};
  return kModes[rng.below(std::size(kModes))];
}

}  // namespace

bool generate_workload(Rng rng, const ProfileBounds& b, Scenario& s) {
  const int32_t ps = s.cache.page_size;
  Batch& batch = s.batch;
  batch.mode = generate_mode(rng);
  const auto batch_size = batch.mode == Mode::idle ? 0 : static_cast<int32_t>(rng.range(1, b.max_batch));

  // Spec-decode shape first: it decides how many columns the batch step needs.
  int32_t step_columns = 1;
  if (batch.mode == Mode::target_verify) {
    batch.topk = rng.chance(1, 3) ? 1 : static_cast<int32_t>(rng.range(2, 4));
    batch.draft_tokens = static_cast<int32_t>(rng.range(1, b.max_draft_tokens));
    step_columns = batch.draft_tokens;
  } else if (batch.mode == Mode::draft_decode) {
    batch.topk = rng.chance(1, 3) ? 1 : static_cast<int32_t>(rng.range(2, 4));
    batch.draft_steps = static_cast<int32_t>(rng.range(1, std::min(limits::kMaxDraftSteps, 6)));
    batch.draft_step = static_cast<int32_t>(rng.below(static_cast<uint64_t>(batch.draft_steps)));
    step_columns = (batch.draft_steps + 2 * ps) * batch.topk;
  } else if (batch.mode != Mode::decode && batch.mode != Mode::idle) {
    step_columns = b.max_extend;
  }

  // Cache sizes: a context long enough for the layers' windows and chunks, a pool that is
  // sometimes tight (so pages are reused) and an SWA pool smaller than the full one.
  CacheConfig& c = s.cache;
  c.max_context_len = static_cast<int32_t>(rng.range(std::max(8, b.max_context_len / 4), b.max_context_len));
  for (const Layer& l : s.model.layers) c.max_context_len = std::max({c.max_context_len, l.chunk, l.window});
  c.max_context_len = std::max(c.max_context_len, step_columns + 2 * ps + 2);
  c.max_requests = static_cast<int32_t>(rng.range(std::max(1, batch_size), std::max(batch_size, b.max_requests)));
  const int64_t typical_tokens = int64_t{c.max_context_len} / 2 * std::max(1, batch_size) + step_columns * batch_size;
  const int64_t tight = typical_tokens / ps + 2 * (batch_size + 1);
  const int64_t pages = rng.chance(1, 2) ? tight : tight * static_cast<int64_t>(rng.range(2, 4));
  const int64_t width = int64_t{s.model.kv_heads} * (s.model.head_dim + s.model.v_head_dim);
  const int64_t memory_pages = limits::kMaxPoolFloats / 2 / (width * static_cast<int64_t>(s.model.layers.size()) * ps);
  c.full_pages = static_cast<int32_t>(
      std::clamp<int64_t>(pages, 4, std::min(memory_pages, limits::kCpuProfilePoolSlots / ps / 2)));
  const bool any_window = std::any_of(s.model.layers.begin(), s.model.layers.end(),
                                      [](const Layer& l) { return l.kind == LayerKind::sliding_window; });
  c.swa_pages = any_window && rng.chance(2, 3) ? std::max(4, c.full_pages * static_cast<int32_t>(rng.range(2, 4)) / 4) : 0;
  c.sort_free = rng.chance(1, 4);

  // History: batch requests 0..n-1 among background requests n.. that come and go.
  HistoryBuilder h(s);
  h.set_batch_requests(batch_size);
  const int32_t max_prefix = std::max(1, c.max_context_len - step_columns - 2 * ps - 1);
  int32_t next_background = batch_size;
  int32_t admitted = 0;
  // Prefix caching: a quarter of the full-pool histories admit the batch's requests onto request
  // 0's first pages (share ops), the shape radix caches and cascade attention serve. Its draws come
  // from a stream of their own, so the other histories are as before.
  Rng share_rng = rng.fork("share");
  int32_t shared_len = 0;
  if (c.swa_pages == 0 && batch_size >= 2 && max_prefix >= ps && share_rng.chance(1, 4)) {
    const int32_t shared_pages =
        static_cast<int32_t>(share_rng.range(1, std::max(1, std::min(max_prefix, b.max_extend) / ps)));
    if (h.emit({OpKind::admit, 0, 0, {}, {}}) && h.emit({OpKind::extend, 0, shared_pages * ps, {}, {}}))
      shared_len = shared_pages * ps;
    admitted = 1;
  }
  // Admits batch request `id`, onto request 0's prefix when the history shares (mostly all of it).
  auto admit_batch = [&](int32_t id) {
    if (!h.emit({OpKind::admit, id, 0, {}, {}})) return false;
    if (shared_len > 0) {
      const int32_t len =
          share_rng.chance(3, 4) ? shared_len : ps * static_cast<int32_t>(share_rng.range(1, shared_len / ps));
      h.emit(share_op(id, 0, len));
    }
    return true;
  };
  // Half the histories open with churn: background requests fill pages and some finish, so the
  // batch's requests grow into reused pages.
  if (rng.chance(1, 2)) {
    const auto churn = static_cast<int32_t>(rng.range(1, std::max(1, c.max_requests - batch_size)));
    for (int32_t i = 0; i < churn; ++i) {
      const int32_t id = next_background++;
      if (h.emit({OpKind::admit, id, 0, {}, {}}))
        h.emit({OpKind::extend, id, corner_length(rng, ps, std::min(max_prefix, b.max_extend)), {}, {}});
    }
    if (admitted < batch_size && admit_batch(admitted)) {
      h.emit({OpKind::extend, admitted, corner_length(rng, ps, std::min(max_prefix, b.max_extend)), {}, {}});
      ++admitted;
    }
    for (int32_t id = batch_size; id < next_background; ++id) {
      if (h.is_live(id) && rng.chance(2, 3)) h.emit({OpKind::free, id, 0, {}, {}});
    }
  }
  const auto ops = static_cast<int32_t>(rng.range(batch_size * 2, b.max_ops));
  for (int32_t i = 0; i < ops && static_cast<int32_t>(s.history.size()) < b.max_ops; ++i) {
    const uint64_t action = rng.below(20);
    const std::vector<int32_t>& live = h.live();
    const int32_t pick = live.empty() ? -1 : live[rng.below(live.size())];
    if (action <= 2 && admitted < batch_size) {
      admit_batch(admitted++);
    } else if (action <= 5 && static_cast<int32_t>(live.size()) < c.max_requests) {
      h.emit({OpKind::admit, next_background++, 0, {}, {}});
    } else if (pick < 0) {
      continue;
    } else if (action <= 10 || (action >= 18 && c.swa_pages == 0)) {
      const int32_t room = max_prefix - h.length(pick);
      if (room >= 1) h.emit({OpKind::extend, pick, corner_length(rng, ps, std::min(room, b.max_extend)), {}, {}});
    } else if (action <= 12) {
      if (h.length(pick) >= 1 && h.length(pick) < max_prefix) h.emit({OpKind::decode, pick, 0, {}, {}});
    } else if (action <= 15) {
      if (pick >= batch_size) h.emit({OpKind::free, pick, 0, {}, {}});
    } else if (action <= 17) {
      if (h.length(pick) < 1 || h.length(pick) >= max_prefix) continue;
      const auto d = static_cast<int32_t>(rng.range(1, std::min(b.max_draft_tokens, max_prefix - h.length(pick))));
      const std::vector<int32_t> tree = generate_tree(rng, d, static_cast<int32_t>(rng.range(1, 3)));
      if (h.emit({OpKind::draft, pick, 0, tree, {}})) h.emit({OpKind::accept, pick, 0, {}, tree_path(rng, tree)});
    } else {
      h.emit({OpKind::swa_evict, pick, 0, {}, {}});
    }
  }
  while (admitted < batch_size) {
    if (!admit_batch(admitted++)) return false;
  }
  // Requests that a decode, verify or drafting step needs to have a prefix.
  for (int32_t id = 0; id < batch_size; ++id) {
    if (h.length(id) == 0 && (batch.mode == Mode::decode || batch.mode == Mode::target_verify ||
                              batch.mode == Mode::draft_decode || rng.chance(1, 2))) {
      if (!h.emit({OpKind::extend, id, corner_length(rng, ps, std::min(max_prefix, b.max_extend)), {}, {}})) return false;
    }
  }

  // The batch, in a shuffled request order.
  std::vector<int32_t> order(static_cast<size_t>(batch_size));
  for (int32_t i = 0; i < batch_size; ++i) order[static_cast<size_t>(i)] = i;
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  int32_t max_extend_in_batch = 0;
  for (int32_t id : order) {
    BatchEntry e{id, 0, {}};
    if (batch.mode == Mode::extend || batch.mode == Mode::draft_extend_v2 ||
        (batch.mode == Mode::mixed && rng.chance(1, 2))) {
      e.extend_len = corner_length(rng, ps, std::min(b.max_extend, c.max_context_len - h.length(id)));
    } else if (batch.mode == Mode::mixed) {
      e.extend_len = 1;
    }
    if (batch.mode == Mode::target_verify) e.parents = generate_tree(rng, batch.draft_tokens, batch.topk);
    max_extend_in_batch = std::max(max_extend_in_batch, e.extend_len);
    batch.entries.push_back(std::move(e));
  }
  batch.graph_bs = rng.chance(1, 3) ? std::min(limits::kMaxBatch, batch_size + static_cast<int32_t>(rng.range(0, 4))) : 0;
  if (batch.mode == Mode::idle && batch.graph_bs == 0 && rng.chance(1, 2)) batch.graph_bs = static_cast<int32_t>(rng.range(1, 4));
  batch.kv_splits = rng.chance(1, 2) ? 1 : static_cast<int32_t>(rng.range(2, 16));
  return true;
}

}  // namespace kvfuzz
