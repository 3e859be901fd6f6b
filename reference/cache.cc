#include "reference/cache.h"

#include <algorithm>

#include "reference/case_error.h"

namespace kvfuzz {
namespace {

[[noreturn]] void fail_op(size_t index, const std::string& what) {
  throw InvalidCase("history[" + std::to_string(index) + "]: " + what);
}

// Appends a page whose reference count just reached 0. A count reaches 0 once (it only falls),
// so the list stays unique in first-seen order without a search: linear in the pages freed,
// which a `long` case's 2^18-token requests need.
void add_freed(std::vector<int32_t>& out, int32_t page) { out.push_back(page); }

}  // namespace

int32_t max_window(const Model& m) {
  int32_t w = 0;
  for (const Layer& l : m.layers) {
    if (l.kind == LayerKind::sliding_window) w = std::max(w, l.window);
  }
  return w;
}

CacheModel::CacheModel(const CacheConfig& c, bool hybrid)
    : full_alloc_(c.full_pages, free_policy(c.page_size, c.sort_free)),
      swa_alloc_(hybrid ? c.swa_pages : 0, free_policy(c.page_size, c.sort_free)) {
  state_.config = c;
  state_.hybrid = hybrid;
  state_.full_slots = int64_t{c.full_pages + 1} * c.page_size;
  state_.swa_slots = hybrid ? int64_t{c.swa_pages + 1} * c.page_size : 0;
  state_.req_to_token.assign(static_cast<size_t>(c.max_requests + 1) * c.max_context_len, 0);
  if (hybrid) {
    state_.full_to_swa.assign(static_cast<size_t>(state_.full_slots + 1), 0);
    state_.full_to_swa.back() = -1;
  }
  state_.full_content.resize(static_cast<size_t>(state_.full_slots));
  state_.swa_content.resize(static_cast<size_t>(state_.swa_slots));
  full_refs_.assign(static_cast<size_t>(c.full_pages + 1), 0);
  swa_refs_.assign(static_cast<size_t>(hybrid ? c.swa_pages + 1 : 0), 0);
  for (int32_t row = 1; row <= c.max_requests; ++row) free_rows_.push_back(row);
}

RequestState& CacheModel::request(int32_t id, size_t index) {
  auto it = state_.requests.find(id);
  if (it == state_.requests.end()) fail_op(index, "request " + std::to_string(id) + " is not live (admit it first)");
  return it->second;
}

bool CacheModel::append(std::span<const Append> appends, bool written) {
  const int32_t ps = state_.config.page_size;
  auto pages_before = [&](int32_t len) { return (len + ps - 1) / ps; };
  int32_t total = 0;
  for (const Append& a : appends) total += pages_before(a.first_column + a.count) - pages_before(a.first_column);
  if (full_alloc_.available() < total || (state_.hybrid && swa_alloc_.available() < total)) return false;

  std::vector<int32_t> full_pages, swa_pages;
  full_alloc_.take(total, full_pages);
  if (state_.hybrid) swa_alloc_.take(total, swa_pages);
  size_t next = 0;
  for (const Append& a : appends) {
    const int32_t row = state_.requests.at(a.request).row;
    int64_t full_slot = 0, swa_slot = 0;
    for (int32_t c = a.first_column; c < a.first_column + a.count; ++c) {
      if (c % ps == 0) {  // a new page
        full_slot = int64_t{full_pages[next]} * ps;
        swa_slot = state_.hybrid ? int64_t{swa_pages[next]} * ps : 0;
        ++next;
      } else if (c == a.first_column) {  // continue the partial last page: last_loc + 1
        full_slot = state_.r2t(row, c - 1) + 1;
        swa_slot = state_.hybrid ? state_.full_to_swa[static_cast<size_t>(full_slot - 1)] + 1 : 0;
      } else {
        ++full_slot;
        ++swa_slot;
      }
      state_.r2t(row, c) = static_cast<int32_t>(full_slot);
      state_.full_content[static_cast<size_t>(full_slot)] = {a.request, c, written};
      ++full_refs_[static_cast<size_t>(full_slot / ps)];
      if (state_.hybrid) {
        state_.full_to_swa[static_cast<size_t>(full_slot)] = swa_slot;
        state_.swa_content[static_cast<size_t>(swa_slot)] = {a.request, c, written};
        ++swa_refs_[static_cast<size_t>(swa_slot / ps)];
      }
    }
  }
  return true;
}

void CacheModel::drop(int32_t request, std::span<const int32_t> columns) {
  const int32_t ps = state_.config.page_size;
  const int32_t row = state_.requests.at(request).row;
  std::vector<int32_t> full_freed, swa_freed;
  for (int32_t c : columns) {
    const int64_t slot = state_.r2t(row, c);
    if (auto held = holders_.find(slot); held != holders_.end()) {  // a shared prefix slot
      std::erase(held->second, request);
      SlotContent& content = state_.full_content[static_cast<size_t>(slot)];
      if (content.request == request) content.request = held->second.front();  // same K/V (shared_prefix.h)
      if (held->second.size() == 1) holders_.erase(held);
      --full_refs_[static_cast<size_t>(slot / ps)];  // another holder keeps the page
      continue;
    }
    state_.full_content[static_cast<size_t>(slot)] = {};
    if (--full_refs_[static_cast<size_t>(slot / ps)] == 0) add_freed(full_freed, static_cast<int32_t>(slot / ps));
    if (!state_.hybrid) continue;
    const int64_t swa = state_.full_to_swa[static_cast<size_t>(slot)];
    state_.full_to_swa[static_cast<size_t>(slot)] = 0;
    if (swa <= 0) continue;  // already evicted
    state_.swa_content[static_cast<size_t>(swa)] = {};
    if (--swa_refs_[static_cast<size_t>(swa / ps)] == 0) add_freed(swa_freed, static_cast<int32_t>(swa / ps));
  }
  full_alloc_.release(full_freed);
  swa_alloc_.release(swa_freed);
}

void CacheModel::set_content(int64_t slot, SlotContent content) {
  state_.full_content[static_cast<size_t>(slot)] = content;
  if (!state_.hybrid) return;
  const int64_t swa = state_.full_to_swa[static_cast<size_t>(slot)];
  if (swa > 0) state_.swa_content[static_cast<size_t>(swa)] = content;
}

void CacheModel::remap(int32_t request, int32_t column, int32_t slot) {
  state_.r2t(state_.requests.at(request).row, column) = slot;
  set_content(slot, {request, column, true});
}

void CacheModel::share(const Op& op, size_t index) {
  const CacheConfig& cfg = state_.config;
  const std::string who = "request " + std::to_string(op.request);
  if (state_.hybrid) fail_op(index, "share needs a cache without an SWA pool (cache.swa_pages = 0)");
  RequestState& r = request(op.request, index);
  const RequestState& source = request(op.from, index);
  if (op.from == op.request) fail_op(index, who + " cannot share its own prefix");
  if (r.seq_len != 0 || !r.draft_parents.empty())
    fail_op(index, who + " must be just admitted (no tokens) to share a prefix");
  if (!source.draft_parents.empty()) fail_op(index, "request " + std::to_string(op.from) + " has pending drafts");
  if (op.len < 1 || op.len % cfg.page_size != 0 || op.len > source.seq_len)
    fail_op(index, "len = " + std::to_string(op.len) +
                       " must be whole pages (a multiple of cache.page_size = " + std::to_string(cfg.page_size) +
                       ") of request " + std::to_string(op.from) + "'s " + std::to_string(source.seq_len) + " tokens");
  for (int32_t c = 0; c < op.len; ++c) {
    const int64_t slot = state_.r2t(source.row, c);
    std::vector<int32_t>& held = holders_[slot];
    if (held.empty()) held.push_back(op.from);
    held.push_back(op.request);
    state_.r2t(r.row, c) = static_cast<int32_t>(slot);
    ++full_refs_[static_cast<size_t>(slot / cfg.page_size)];
  }
  r.seq_len = op.len;
}

void CacheModel::apply(const Op& op, int32_t window, size_t index) {
  const CacheConfig& cfg = state_.config;
  const std::string who = "request " + std::to_string(op.request);
  auto no_drafts = [&](const RequestState& r) {
    if (!r.draft_parents.empty()) fail_op(index, who + " has pending drafts; only accept or free may follow a draft");
  };
  auto grow = [&](RequestState& r, int32_t count) {
    if (int64_t{r.seq_len} + count > cfg.max_context_len)
      fail_op(index, who + " would reach " + std::to_string(r.seq_len + count) + " tokens, over cache.max_context_len = " +
                         std::to_string(cfg.max_context_len));
    const Append a{op.request, r.seq_len, count};
    if (!append({&a, 1}))
      fail_op(index, "the KV pool is exhausted (" + std::to_string(count) + " more tokens for " + who +
                         "; cache.full_pages = " + std::to_string(cfg.full_pages) +
                         ", cache.swa_pages = " + std::to_string(cfg.swa_pages) + ")");
  };

  switch (op.kind) {
    case OpKind::admit: {
      if (state_.requests.count(op.request)) fail_op(index, who + " is already live");
      if (row_head_ == free_rows_.size())
        fail_op(index, "no free req_to_token row for " + who + " (cache.max_requests = " +
                           std::to_string(cfg.max_requests) + ")");
      state_.requests[op.request].row = free_rows_[row_head_++];
      break;
    }
    case OpKind::extend:
    case OpKind::decode: {
      RequestState& r = request(op.request, index);
      no_drafts(r);
      const int32_t count = op.kind == OpKind::extend ? op.len : 1;
      grow(r, count);
      r.seq_len += count;
      break;
    }
    case OpKind::free: {
      RequestState& r = request(op.request, index);
      std::vector<int32_t> columns(static_cast<size_t>(r.seq_len + static_cast<int32_t>(r.draft_parents.size())));
      for (size_t c = 0; c < columns.size(); ++c) columns[c] = static_cast<int32_t>(c);
      drop(op.request, columns);
      free_rows_.push_back(r.row);
      state_.requests.erase(op.request);
      break;
    }
    case OpKind::share:
      share(op, index);
      break;
    case OpKind::swa_evict: {
      if (!state_.hybrid) fail_op(index, "swa_evict needs an SWA pool (cache.swa_pages > 0)");
      RequestState& r = request(op.request, index);
      no_drafts(r);
      // Tokens every window has left: below seq_len - W for the widest window, whole pages only.
      const int32_t ps = cfg.page_size;
      const int32_t bound = std::max(0, r.seq_len - window) / ps * ps;
      std::vector<int32_t> freed;
      for (int32_t c = r.swa_evicted; c < bound; ++c) {
        const int64_t slot = state_.r2t(r.row, c);
        const int64_t swa = state_.full_to_swa[static_cast<size_t>(slot)];
        state_.full_to_swa[static_cast<size_t>(slot)] = 0;
        if (swa <= 0) continue;
        state_.swa_content[static_cast<size_t>(swa)] = {};
        if (--swa_refs_[static_cast<size_t>(swa / ps)] == 0) add_freed(freed, static_cast<int32_t>(swa / ps));
      }
      swa_alloc_.release(freed);
      r.swa_evicted = std::max(r.swa_evicted, bound);
      break;
    }
    case OpKind::draft: {
      RequestState& r = request(op.request, index);
      no_drafts(r);
      grow(r, static_cast<int32_t>(op.parents.size()));
      r.draft_parents = op.parents;
      break;
    }
    case OpKind::accept: {
      RequestState& r = request(op.request, index);
      if (r.draft_parents.empty()) fail_op(index, who + " has no pending drafts to accept");
      const auto d = static_cast<int32_t>(r.draft_parents.size());
      const auto acc = static_cast<int32_t>(op.path.size());
      for (int32_t i = 0; i < acc; ++i) {
        const int32_t node = op.path[static_cast<size_t>(i)];
        const int32_t want = i == 0 ? -1 : op.path[static_cast<size_t>(i - 1)];
        if (node < 0 || node >= d || r.draft_parents[static_cast<size_t>(node)] != want)
          fail_op(index, "path[" + std::to_string(i) + "] = " + std::to_string(node) +
                             " does not continue a root-to-leaf path of the pending tree");
      }
      std::vector<bool> kept(static_cast<size_t>(d), false);
      for (int32_t node : op.path) kept[static_cast<size_t>(node)] = true;
      std::vector<int32_t> rejected;
      if (cfg.page_size == 1) {
        // Free the rejected drafts, then point columns s.. at the accepted slots.
        std::vector<int32_t> slots;
        for (int32_t node : op.path) slots.push_back(state_.r2t(r.row, r.seq_len + node));
        for (int32_t i = 0; i < d; ++i) {
          if (!kept[static_cast<size_t>(i)]) rejected.push_back(r.seq_len + i);
        }
        drop(op.request, rejected);
        for (int32_t i = 0; i < acc; ++i) remap(op.request, r.seq_len + i, slots[static_cast<size_t>(i)]);
      } else {
        // The accepted K/V move into the first acc verify slots (in-page offsets stay right);
        // pages past the last kept token are freed.
        for (int32_t i = acc; i < d; ++i) rejected.push_back(r.seq_len + i);
        drop(op.request, rejected);
        for (int32_t i = 0; i < acc; ++i) remap(op.request, r.seq_len + i, state_.r2t(r.row, r.seq_len + i));
      }
      r.seq_len += acc;
      r.draft_parents.clear();
      break;
    }
  }
}

}  // namespace kvfuzz
