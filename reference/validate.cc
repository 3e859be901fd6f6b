#include "reference/validate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "reference/forward_batch.h"
#include "reference/case_error.h"
#include "reference/limits.h"
#include "reference/logical.h"

namespace kvfuzz {
namespace {

[[noreturn]] void fail(const std::string& field, const std::string& what) {
  throw InvalidCase(field + ": " + what);
}

std::string str(int64_t x) { return std::to_string(x); }

void check_range(const std::string& field, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) fail(field, str(value) + " is out of range [" + str(lo) + ", " + str(hi) + "]");
}

void check_zero(const std::string& field, int64_t value, const std::string& why) {
  if (value != 0) fail(field, "must be 0 " + why + " (is " + str(value) + ")");
}

std::string at(const std::string& base, size_t i) { return base + "[" + std::to_string(i) + "]"; }

void validate_model(const Model& m, const CacheConfig& c) {
  check_range("model.q_heads", m.q_heads, 1, limits::kMaxQHeads);
  check_range("model.kv_heads", m.kv_heads, 1, m.q_heads);
  if (m.q_heads % m.kv_heads != 0)
    fail("model.kv_heads", str(m.kv_heads) + " does not divide q_heads = " + str(m.q_heads));
  check_range("model.head_dim", m.head_dim, 1, limits::kMaxHeadDim);
  check_range("model.v_head_dim", m.v_head_dim, 1, limits::kMaxHeadDim);
  if (m.mla) {
    if (m.kv_heads != 1) fail("model.kv_heads", "an MLA latent cache has one KV head (is " + str(m.kv_heads) + ")");
    if (m.v_head_dim > m.head_dim)
      fail("model.v_head_dim", "MLA's V is a prefix of K, so v_head_dim <= head_dim = " + str(m.head_dim));
  }
  if (!(m.sm_scale > 0.0 && m.sm_scale <= limits::kMaxSmScale))
    fail("model.sm_scale", "must be in (0, " + std::to_string(limits::kMaxSmScale) + "]");
  if (!(m.softcap >= 0.0 && m.softcap <= limits::kMaxSoftcap))
    fail("model.softcap", "must be 0 (off) or in (0, " + std::to_string(limits::kMaxSoftcap) + "]");
  if (!m.sinks.empty()) {
    if (m.sinks.size() != static_cast<size_t>(m.q_heads))
      fail("model.sinks", "holds " + str(static_cast<int64_t>(m.sinks.size())) +
                              " sink logits; the model has q_heads = " + str(m.q_heads) + " (one per q head)");
    for (size_t h = 0; h < m.sinks.size(); ++h)
      if (!(std::abs(m.sinks[h]) <= limits::kMaxSink))
        fail(at("model.sinks", h), "must be finite and within +-" + std::to_string(limits::kMaxSink));
  }
  check_range("model.layers (count)", static_cast<int64_t>(m.layers.size()), 1, limits::kMaxLayers);
  bool any_window = false;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const Layer& l = m.layers[i];
    const std::string f = at("model.layers", i);
    if (l.kind == LayerKind::sliding_window) {
      any_window = true;
      check_range(f + ".window", l.window, 0, c.max_context_len);
    } else {
      check_zero(f + ".window", l.window, "for a " + to_string(l.kind) + " layer");
    }
    if (l.kind == LayerKind::chunked) {
      check_range(f + ".chunk", l.chunk, 1, c.max_context_len);
      if (l.chunk % c.page_size != 0)
        fail(f + ".chunk", str(l.chunk) + " is not a multiple of cache.page_size = " + str(c.page_size) +
                               " (local attention slices the page table by chunk)");
    } else {
      check_zero(f + ".chunk", l.chunk, "for a " + to_string(l.kind) + " layer");
    }
  }
  if (c.swa_pages > 0 && !any_window)
    fail("cache.swa_pages", "an SWA pool needs at least one sliding_window layer");
}

void validate_cache(const CacheConfig& c) {
  check_range("cache.page_size", c.page_size, 1, limits::kMaxPageSize);
  const int64_t max_pages = limits::kMaxPoolSlots / c.page_size - 1;
  check_range("cache.full_pages", c.full_pages, 1, max_pages);
  check_range("cache.swa_pages", c.swa_pages, 0, max_pages);
  check_range("cache.max_requests", c.max_requests, 1, limits::kMaxRequests);
  check_range("cache.max_context_len", c.max_context_len, 1, limits::kMaxContextLen);
  const int64_t entries = int64_t{c.max_requests + 1} * c.max_context_len;
  if (entries > limits::kMaxReqToTokenEntries)
    fail("cache.max_context_len", "req_to_token would hold " + str(entries) + " entries, over the limit of " +
                                      str(limits::kMaxReqToTokenEntries));
}

void validate_memory(const Scenario& s, const CacheState& cache) {
  const int64_t floats = written_pool_values(s, cache);
  if (floats > limits::kMaxWrittenPoolFloats)
    fail("history", "the K/V pools would hold " + str(floats) + " written values, over the limit of " +
                        str(limits::kMaxWrittenPoolFloats) + " (fewer live tokens, heads or layers)");
}

void check_tree(const std::string& field, const std::vector<int32_t>& parents, int32_t topk) {
  std::string why;
  if (!is_tree(parents, topk, &why)) fail(field, why);
}

// A shared prefix is a property of the history (shared_prefix.h): a request shares at most once,
// and every request a share names is admitted once, so its id means one request all along.
void validate_shares(const std::vector<Op>& history) {
  std::map<int32_t, int32_t> admits;
  for (const Op& op : history) admits[op.request] += op.kind == OpKind::admit;
  std::set<int32_t> sharers;
  for (size_t i = 0; i < history.size(); ++i) {
    const Op& op = history[i];
    if (op.kind != OpKind::share) continue;
    if (!sharers.insert(op.request).second)
      fail(at("history", i), "request " + str(op.request) + " shares a prefix twice");
    for (int32_t id : {op.request, op.from}) {
      if (admits[id] > 1)
        fail(at("history", i), "request " + str(id) + " takes part in a share and is admitted " + str(admits[id]) +
                                   " times (a shared request is admitted once)");
    }
  }
}

void validate_history_shape(const Scenario& s) {
  check_range("history (length)", static_cast<int64_t>(s.history.size()), 0, limits::kMaxHistoryOps);
  for (size_t i = 0; i < s.history.size(); ++i) {
    const Op& op = s.history[i];
    const std::string f = at("history", i);
    check_range(f + ".request", op.request, 0, limits::kMaxRequestId);
    if (op.kind == OpKind::extend || op.kind == OpKind::share)
      check_range(f + ".len", op.len, 1, s.cache.max_context_len);
    else check_zero(f + ".len", op.len, "for " + to_string(op.kind));
    if (op.kind == OpKind::share) check_range(f + ".from", op.from, 0, limits::kMaxRequestId);
    else if (op.from != -1) fail(f + ".from", "only a share op names a request to share from");
    if (op.kind == OpKind::draft) {
      check_range(f + ".parents (length)", static_cast<int64_t>(op.parents.size()), 1, limits::kMaxDraftTokens);
      check_tree(f + ".parents", op.parents, 0);
    } else if (!op.parents.empty()) {
      fail(f + ".parents", "only a draft op has parents");
    }
    if (op.kind == OpKind::accept) {
      check_range(f + ".path (length)", static_cast<int64_t>(op.path.size()), 1, limits::kMaxDraftTokens);
    } else if (!op.path.empty()) {
      fail(f + ".path", "only an accept op has a path");
    }
  }
  validate_shares(s.history);
}

void validate_batch_shape(const Scenario& s) {
  const Batch& b = s.batch;
  const size_t n = b.entries.size();
  if (b.mode == Mode::idle) {
    if (n != 0) fail("batch.entries", "an idle batch has no entries (has " + str(n) + ")");
  } else {
    check_range("batch.entries (count)", static_cast<int64_t>(n), 1, limits::kMaxBatch);
  }
  const bool verify = b.mode == Mode::target_verify, drafting = is_drafting_step(b.mode);
  if (verify) check_range("batch.draft_tokens", b.draft_tokens, 1, limits::kMaxDraftTokens);
  else check_zero("batch.draft_tokens", b.draft_tokens, "outside target_verify");
  if (verify || b.mode == Mode::draft_decode) check_range("batch.topk", b.topk, 1, limits::kMaxTopk);
  else if (b.topk != 1) fail("batch.topk", "must be 1 outside target_verify and draft_decode");
  if (drafting) {
    check_range("batch.draft_steps", b.draft_steps, 1, limits::kMaxDraftSteps);
    check_range("batch.draft_step", b.draft_step, 0, b.draft_steps - 1);
  } else {
    check_zero("batch.draft_steps", b.draft_steps, "outside draft_decode and draft_q_only");
    check_zero("batch.draft_step", b.draft_step, "outside draft_decode and draft_q_only");
  }
  if (b.graph_bs != 0) check_range("batch.graph_bs", b.graph_bs, static_cast<int64_t>(std::max<size_t>(n, 1)), limits::kMaxBatch);
  check_range("batch.kv_splits", b.kv_splits, 1, limits::kMaxKvSplits);
  check_range("batch.device_sms", b.device_sms, 0, limits::kMaxDeviceSms);

  for (size_t i = 0; i < n; ++i) {
    const BatchEntry& e = b.entries[i];
    const std::string f = at("batch.entries", i);
    check_range(f + ".request", e.request, 0, limits::kMaxRequestId);
    for (size_t j = 0; j < i; ++j) {
      if (b.entries[j].request == e.request)
        fail(f + ".request", "request " + str(e.request) + " is already in the batch at entries[" + str(j) + "]");
    }
    if (uses_extend_len(b.mode)) check_range(f + ".extend_len", e.extend_len, 1, s.cache.max_context_len);
    else check_zero(f + ".extend_len", e.extend_len, "for mode " + to_string(b.mode));
    if (verify) {
      if (static_cast<int32_t>(e.parents.size()) != b.draft_tokens)
        fail(f + ".parents", "has " + str(e.parents.size()) + " nodes, batch.draft_tokens is " + str(b.draft_tokens));
      check_tree(f + ".parents", e.parents, b.topk);
    } else if (!e.parents.empty()) {
      fail(f + ".parents", "only target_verify entries have a tree");
    }
  }
}

void validate_values(const ValueConfig&) {}  // every seed, dtype, fill and poison is valid

// Per-tensor fp8 scales: only on fp8_e4m3 caches, in range, few significand bits (limits.h).
void validate_kv_scales(const Scenario& s) {
  for (size_t i = 0; i < s.model.layers.size(); ++i) {
    const Layer& l = s.model.layers[i];
    for (auto [name, scale] : {std::pair{"k_scale", l.k_scale}, std::pair{"v_scale", l.v_scale}}) {
      const std::string f = at("model.layers", i) + "." + name;
      if (scale == 1.0f) continue;
      if (s.values.dtype != DType::fp8_e4m3)
        fail(f, "a scale other than 1 needs an fp8 cache (values.dtype fp8_e4m3, is " +
                    std::string(to_string(s.values.dtype)) + ")");
      if (!(scale >= limits::kMinKvScale && scale <= limits::kMaxKvScale))
        fail(f, std::to_string(scale) + " is out of range [2^-8, 2^4]");
      int e;
      const double frac = std::frexp(static_cast<double>(scale), &e);
      if (std::ldexp(frac, limits::kKvScaleBits) != std::nearbyint(std::ldexp(frac, limits::kKvScaleBits)))
        fail(f, std::to_string(scale) + " has more than " + str(limits::kKvScaleBits) +
                    " significand bits (stored * scale must be exact in the kernel's dtype)");
      if (s.model.mla && std::string_view(name) == "v_scale")
        fail(f, "must be 1 on an MLA model (the latent cache has one scale, k_scale)");
    }
  }
}

void validate_work(const Scenario& s) {
  const LogicalBatch lb = derive_logical(s);
  const int64_t width = int64_t{s.model.q_heads} * (s.model.head_dim + s.model.v_head_dim);
  int64_t work = 0;
  for (const Layer& layer : s.model.layers) {
    for (const LogicalRow& row : lb.rows) {
      for (size_t q = 0; q < row.queries.size(); ++q) {
        for (const ColumnRange& r : visible(layer, row, static_cast<int32_t>(q))) work += r.end - r.begin;
      }
    }
    if (work * width > limits::kMaxOracleWork) break;
  }
  if (work * width > limits::kMaxOracleWork)
    fail("batch", "the oracle would do " + str(work * width) + " multiply-adds, over the limit of " +
                      str(limits::kMaxOracleWork) + " (fewer tokens, heads or layers)");
}

}  // namespace

int64_t written_pool_values(const Scenario& s, const CacheState& cache) {
  const Model& m = s.model;
  auto live = [](const std::vector<SlotContent>& content) {
    return std::count_if(content.begin(), content.end(), [](const SlotContent& c) { return c.live(); });
  };
  const int64_t full = live(cache.full_content), swa = live(cache.swa_content);
  const int64_t width = int64_t{m.kv_heads} * (m.head_dim + (m.mla ? 0 : m.v_head_dim));
  int64_t values = 0;
  for (const Layer& l : m.layers) values += (l.kind == LayerKind::sliding_window && cache.hybrid ? swa : full) * width;
  return values;
}

bool is_tree(const std::vector<int32_t>& parents, int32_t topk, std::string* why) {
  auto reject = [&](std::string what) {
    if (why) *why = std::move(what);
    return false;
  };
  if (parents.empty()) return reject("a tree needs a root");
  if (parents[0] != -1) return reject("node 0 is the root, its parent must be -1 (is " + str(parents[0]) + ")");
  std::vector<int32_t> children(parents.size(), 0);
  for (size_t i = 1; i < parents.size(); ++i) {
    const int32_t p = parents[i];
    if (p < 0 || p >= static_cast<int32_t>(i))
      return reject("node " + str(i) + " has parent " + str(p) + "; a parent must come before its child (0 <= parent < " +
                    str(i) + ")");
    if (topk > 0 && ++children[p] > topk)
      return reject("node " + str(p) + " has more than topk = " + str(topk) + " children");
  }
  return true;
}

void validate(const Scenario& s) {
  validate_cache(s.cache);
  validate_model(s.model, s.cache);
  validate_history_shape(s);
  validate_batch_shape(s);
  validate_values(s.values);
  validate_kv_scales(s);
  // The replay checks what depends on the order of events: live requests, pool capacity,
  // context length, pending drafts, and the batch against the requests it names.
  validate_memory(s, prepare(s).cache);
  validate_work(s);
}

bool is_valid(const Scenario& s, std::string* why) {
  try {
    validate(s);
    return true;
  } catch (const InvalidCase& e) {
    if (why) *why = e.what();
    return false;
  }
}

}  // namespace kvfuzz
