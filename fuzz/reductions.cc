#include "fuzz/reductions.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "reference/validate.h"

namespace kvfuzz {
namespace {

// The smallest value of one size field that still validates (binary search; sizes only ever
// make a case invalid by being too small).
void minimize(Scenario& s, int32_t lowest, const std::function<int32_t&(Scenario&)>& field) {
  int32_t lo = lowest, hi = field(s);
  while (lo < hi) {
    Scenario t = s;
    field(t) = lo + (hi - lo) / 2;
    if (is_valid(t)) hi = field(t);
    else lo = field(t) + 1;
  }
  field(s) = hi;
}

// The pools and the context cut to what the case needs: small pools make reuse happen with few
// tokens, a full context keeps near-capacity failures. One pool at a time too, since a failure
// may need one pool short and the other not (an SWA mapping that diverges from the full pool).
enum Tighten : unsigned { kFull = 1, kSwa = 2, kContext = 4, kAll = 7 };

Scenario tightened(Scenario s, unsigned which = kAll) {
  if (!is_valid(s)) return s;
  if (which & kFull) minimize(s, 1, [](Scenario& x) -> int32_t& { return x.cache.full_pages; });
  if ((which & kSwa) && s.cache.swa_pages > 0) minimize(s, 1, [](Scenario& x) -> int32_t& { return x.cache.swa_pages; });
  if (which & kContext) minimize(s, 1, [](Scenario& x) -> int32_t& { return x.cache.max_context_len; });
  return s;
}

bool in_batch(const Scenario& s, int32_t request) {
  return std::any_of(s.batch.entries.begin(), s.batch.entries.end(), [&](const BatchEntry& e) { return e.request == request; });
}

// Smaller values to try for a positive integer, smallest first.
std::vector<int32_t> smaller(int32_t x, int32_t floor = 1) {
  std::vector<int32_t> out;
  for (int32_t c : {floor, x / 4, x / 2, x - 1})
    if (c >= floor && c < x && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  return out;
}

void batch_reductions(const Scenario& s, std::vector<Scenario>& out) {
  const Batch& b = s.batch;
  for (size_t i = 0; b.entries.size() > 1 && i < b.entries.size(); ++i) {
    Scenario c = s;
    c.batch.entries.erase(c.batch.entries.begin() + static_cast<ptrdiff_t>(i));
    out.push_back(std::move(c));
  }
  // Execution settings back to their plainest: eager, one split, static splits.
  for (auto [field, plain] : {std::pair{&Batch::graph_bs, 0}, {&Batch::kv_splits, 1}, {&Batch::device_sms, 0}}) {
    if (b.*field == plain) continue;
    Scenario c = s;
    c.batch.*field = plain;
    out.push_back(std::move(c));
  }
  for (size_t i = 0; i < b.entries.size(); ++i) {
    for (int32_t len : smaller(b.entries[i].extend_len)) {
      Scenario c = s;
      c.batch.entries[i].extend_len = len;
      out.push_back(std::move(c));
    }
  }
  if (b.mode == Mode::target_verify) {
    for (int32_t d : smaller(b.draft_tokens)) {
      Scenario c = s;
      c.batch.draft_tokens = d;
      for (BatchEntry& e : c.batch.entries) e.parents.resize(static_cast<size_t>(d));
      out.push_back(std::move(c));
    }
    if (b.topk > 1) {
      Scenario c = s;
      c.batch.topk = 1;
      for (BatchEntry& e : c.batch.entries)
        for (size_t i = 0; i < e.parents.size(); ++i) e.parents[i] = static_cast<int32_t>(i) - 1;
      out.push_back(std::move(c));
    }
  }
  if (b.mode == Mode::draft_decode) {
    for (int32_t steps : smaller(b.draft_steps)) {
      Scenario c = s;
      c.batch.draft_steps = steps;
      c.batch.draft_step = std::min(c.batch.draft_step, steps - 1);
      out.push_back(std::move(c));
    }
    for (int32_t step : smaller(b.draft_step, 0)) {
      Scenario c = s;
      c.batch.draft_step = step;
      out.push_back(std::move(c));
    }
    for (int32_t topk : smaller(b.topk)) {
      Scenario c = s;
      c.batch.topk = topk;
      out.push_back(std::move(c));
    }
  }
}

void history_reductions(const Scenario& s, std::vector<Scenario>& out) {
  std::set<int32_t> others;
  for (const Op& op : s.history)
    if (!in_batch(s, op.request)) others.insert(op.request);
  for (int32_t r : others) {  // a whole request the batch does not use
    Scenario c = s;
    std::erase_if(c.history, [&](const Op& op) { return op.request == r; });
    out.push_back(c);
    out.push_back(tightened(c, kSwa));  // and a pool as full as before: keeps reuse going
    out.push_back(tightened(std::move(c)));
  }
  const size_t n = s.history.size();
  for (size_t chunk = n / 2; chunk >= 1; chunk /= 2) {  // runs of ops, halves first
    for (size_t at = 0; at + chunk <= n; at += chunk) {
      Scenario c = s;
      c.history.erase(c.history.begin() + static_cast<ptrdiff_t>(at), c.history.begin() + static_cast<ptrdiff_t>(at + chunk));
      out.push_back(std::move(c));
    }
  }
  for (size_t i = 0; i + 1 < n; ++i) {  // a draft with its accept
    if (s.history[i].kind != OpKind::draft) continue;
    for (size_t j = i + 1; j < n; ++j) {
      if (s.history[j].request != s.history[i].request || s.history[j].kind != OpKind::accept) continue;
      Scenario c = s;
      c.history.erase(c.history.begin() + static_cast<ptrdiff_t>(j));
      c.history.erase(c.history.begin() + static_cast<ptrdiff_t>(i));
      out.push_back(std::move(c));
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (s.history[i].kind != OpKind::extend) continue;
    for (int32_t len : smaller(s.history[i].len)) {
      Scenario c = s;
      c.history[i].len = len;
      out.push_back(c);
      // The same with pools and context tightened: keeps failures that need a full pool or a
      // near-full context while the case gets shorter.
      out.push_back(tightened(c, kSwa));
      out.push_back(tightened(std::move(c)));
    }
  }
}

void model_reductions(const Scenario& s, std::vector<Scenario>& out) {
  const Model& m = s.model;
  for (size_t i = 0; m.layers.size() > 1 && i < m.layers.size(); ++i) {
    Scenario c = s;
    c.model.layers.erase(c.model.layers.begin() + static_cast<ptrdiff_t>(i));
    out.push_back(std::move(c));
  }
  // Fewer q heads keep the first heads' sinks (one per q head).
  auto trim_sinks = [](Scenario& c) {
    if (!c.model.sinks.empty()) c.model.sinks.resize(static_cast<size_t>(c.model.q_heads));
  };
  if (m.q_heads > m.kv_heads) {
    Scenario c = s;
    c.model.q_heads = m.kv_heads;
    trim_sinks(c);
    out.push_back(std::move(c));
  }
  if (m.kv_heads > 1) {
    Scenario c = s;
    c.model.q_heads = m.q_heads / m.kv_heads;
    c.model.kv_heads = 1;
    trim_sinks(c);
    out.push_back(std::move(c));
  }
  if (!m.sinks.empty()) {  // a finding that holds without attention sinks
    Scenario c = s;
    c.model.sinks.clear();
    out.push_back(std::move(c));
  }
  for (int32_t d : smaller(m.v_head_dim)) {
    Scenario c = s;
    c.model.v_head_dim = d;
    if (!m.mla) c.model.head_dim = std::min(m.head_dim, d);
    out.push_back(std::move(c));
  }
  for (int32_t d : smaller(m.head_dim, m.mla ? m.v_head_dim + 1 : 1)) {
    Scenario c = s;
    c.model.head_dim = d;
    out.push_back(std::move(c));
  }
  if (m.softcap != 0.0) {
    Scenario c = s;
    c.model.softcap = 0.0;
    out.push_back(std::move(c));
  }
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const Layer& l = m.layers[i];
    for (int32_t w : smaller(l.window, 0)) {
      if (l.kind != LayerKind::sliding_window) break;
      Scenario c = s;
      c.model.layers[i].window = w;
      out.push_back(std::move(c));
    }
    if (l.kind == LayerKind::chunked && l.chunk > s.cache.page_size) {
      Scenario c = s;
      c.model.layers[i].chunk = l.chunk - s.cache.page_size;
      out.push_back(std::move(c));
    }
  }
}

void cache_reductions(const Scenario& s, std::vector<Scenario>& out) {
  const CacheConfig& cc = s.cache;
  for (int32_t ps : smaller(cc.page_size)) {
    Scenario c = s;
    c.cache.page_size = ps;
    c.cache.full_pages = (cc.full_pages + 1) * cc.page_size / ps - 1;
    c.cache.swa_pages = cc.swa_pages > 0 ? (cc.swa_pages + 1) * cc.page_size / ps - 1 : 0;
    out.push_back(std::move(c));
  }
  for (int32_t CacheConfig::*size : {&CacheConfig::full_pages, &CacheConfig::swa_pages, &CacheConfig::max_requests,
                                      &CacheConfig::max_context_len}) {
    for (int32_t smaller_size : smaller(cc.*size)) {
      Scenario c = s;
      c.cache.*size = smaller_size;
      out.push_back(std::move(c));
    }
  }
  if (cc.sort_free) {
    Scenario c = s;
    c.cache.sort_free = false;
    out.push_back(std::move(c));
  }
}

void value_reductions(const Scenario& s, std::vector<Scenario>& out) {
  if (s.values.fill != Fill::signature) {
    Scenario c = s;
    c.values.fill = Fill::signature;
    out.push_back(std::move(c));
  }
  if (s.values.dtype != DType::fp32) {
    Scenario c = s;
    c.values.dtype = DType::fp32;
    out.push_back(std::move(c));
  }
}

}  // namespace

std::vector<Scenario> reductions(const Scenario& s) {
  return reductions(s, [] { return false; });
}

std::vector<Scenario> reductions(const Scenario& s, const std::function<bool()>& spent) {
  std::vector<Scenario> out;
  for (unsigned which : {kAll, kFull, kSwa, kContext})
    if (Scenario t = tightened(s, which); !(t == s)) out.push_back(std::move(t));
  for (auto family : {batch_reductions, history_reductions, model_reductions, cache_reductions, value_reductions}) {
    if (spent()) break;
    family(s, out);
  }
  return out;
}

CaseSize case_size(const Scenario& s) {
  std::map<int32_t, int32_t> len, peak;
  for (const Op& op : s.history) {
    int32_t& l = len[op.request];
    switch (op.kind) {
      case OpKind::extend:
      case OpKind::share:
        l += op.len;
        break;
      case OpKind::decode: l += 1; break;
      case OpKind::draft: peak[op.request] = std::max(peak[op.request], l + static_cast<int32_t>(op.parents.size())); break;
      case OpKind::accept: l += static_cast<int32_t>(op.path.size()); break;
      case OpKind::free: l = 0; break;
      default: break;
    }
    peak[op.request] = std::max(peak[op.request], l);
  }
  for (const BatchEntry& e : s.batch.entries) {
    int32_t step = 1;
    if (s.batch.mode == Mode::target_verify) step = s.batch.draft_tokens;
    else if (s.batch.mode == Mode::draft_decode) step = s.batch.topk * s.batch.draft_steps;
    else if (e.extend_len > 0) step = e.extend_len;
    peak[e.request] = std::max(peak[e.request], len[e.request] + step);
  }
  CaseSize size;
  size.requests = static_cast<int32_t>(peak.size());
  for (const auto& [id, p] : peak) size.max_tokens = std::max(size.max_tokens, p);
  size.history_ops = static_cast<int32_t>(s.history.size());
  size.layers = static_cast<int32_t>(s.model.layers.size());
  return size;
}

}  // namespace kvfuzz
