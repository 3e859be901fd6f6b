#include "fuzz/mutate.h"

#include <algorithm>
#include <string_view>

#include "reference/case_error.h"
#include "reference/generate.h"
#include "reference/scenario_json.h"
#include "reference/validate.h"

namespace kvfuzz {
namespace {

int32_t next_request_id(const Scenario& s) {
  int32_t id = 0;
  for (const Op& op : s.history) id = std::max(id, op.request + 1);
  return id;
}

void mutate_cache(Scenario& s, Rng& rng) {
  CacheConfig& c = s.cache;
  switch (rng.below(4)) {
    case 0: {
      const int32_t old = c.page_size;
      Rng r = rng.fork("ps");
      c.page_size = generate_page_size(r, bounds(Profile::small));
      c.full_pages = std::max(1, (c.full_pages + 1) * old / c.page_size - 1);
      if (c.swa_pages > 0) c.swa_pages = std::max(1, (c.swa_pages + 1) * old / c.page_size - 1);
      for (Layer& l : s.model.layers)
        if (l.kind == LayerKind::chunked) l.chunk = std::max(1, l.chunk / c.page_size) * c.page_size;
      break;
    }
    case 1: c.sort_free = !c.sort_free; break;
    case 2: c.full_pages = std::max(1, static_cast<int32_t>(c.full_pages * (rng.chance(1, 2) ? 2 : 1) / (rng.chance(1, 2) ? 1 : 2))); break;
    default: c.swa_pages = c.swa_pages > 0 && rng.chance(1, 3) ? 0 : static_cast<int32_t>(rng.range(1, std::max(2, c.full_pages))); break;
  }
}

void mutate_history(Scenario& s, Rng& rng) {
  auto& h = s.history;
  const auto at = h.empty() ? 0 : static_cast<size_t>(rng.below(h.size() + 1));
  const int32_t some = h.empty() ? 0 : h[rng.below(h.size())].request;
  switch (rng.below(6)) {
    case 0:
      if (!h.empty()) h.erase(h.begin() + static_cast<ptrdiff_t>(std::min(at, h.size() - 1)));
      break;
    case 1: {  // a request that comes and goes: moves every later page
      const int32_t id = next_request_id(s);
      const auto len = static_cast<int32_t>(corner_length(rng, s.cache.page_size, 3 * s.cache.page_size + 2));
      h.insert(h.begin() + static_cast<ptrdiff_t>(at), {{OpKind::admit, id, 0, {}, {}}, {OpKind::extend, id, len, {}, {}}, {OpKind::free, id, 0, {}, {}}});
      break;
    }
    case 2: h.insert(h.begin() + static_cast<ptrdiff_t>(at), {OpKind::extend, some, corner_length(rng, s.cache.page_size, 64), {}, {}}); break;
    case 3: h.insert(h.begin() + static_cast<ptrdiff_t>(at), {OpKind::decode, some, 0, {}, {}}); break;
    case 4: h.insert(h.begin() + static_cast<ptrdiff_t>(at), {OpKind::swa_evict, some, 0, {}, {}}); break;
    default: {
      for (Op& op : h) {
        if (op.kind == OpKind::extend && rng.chance(1, 3)) op.len = corner_length(rng, s.cache.page_size, std::max(1, op.len * 2));
      }
      break;
    }
  }
}

void mutate_batch(Scenario& s, Rng& rng) {
  Batch& b = s.batch;
  switch (rng.below(6)) {
    case 0: b.graph_bs = b.graph_bs > 0 ? 0 : static_cast<int32_t>(b.entries.size() + rng.below(4)); break;
    case 1:
      b.kv_splits = static_cast<int32_t>(rng.range(1, 16));
      if (rng.chance(1, 2)) b.device_sms = rng.chance(1, 3) ? 0 : static_cast<int32_t>(rng.range(1, 320));
      break;
    case 2:
      if (b.entries.size() > 1) b.entries.erase(b.entries.begin() + static_cast<ptrdiff_t>(rng.below(b.entries.size())));
      break;
    case 3:
      for (BatchEntry& e : b.entries)
        if (e.extend_len > 0) e.extend_len = corner_length(rng, s.cache.page_size, std::max(2, e.extend_len * 2));
      break;
    case 4:
      if (b.mode == Mode::target_verify && !b.entries.empty()) {  // re-hang one node of one tree
        BatchEntry& e = b.entries[rng.below(b.entries.size())];
        if (e.parents.size() > 1) {
          const auto n = static_cast<size_t>(rng.range(1, static_cast<int64_t>(e.parents.size()) - 1));
          e.parents[n] = static_cast<int32_t>(rng.below(n));
        }
      } else if (b.mode == Mode::draft_decode) {
        b.draft_step = static_cast<int32_t>(rng.below(static_cast<uint64_t>(b.draft_steps)));
      }
      break;
    default: std::reverse(b.entries.begin(), b.entries.end()); break;
  }
}

void mutate_model(Scenario& s, Rng& rng) {
  Model& m = s.model;
  switch (rng.below(5)) {
    case 0: {
      Layer& l = m.layers[rng.below(m.layers.size())];
      const int32_t ps = s.cache.page_size;
      switch (rng.below(3)) {
        case 0: l = {LayerKind::full, 0, 0}; break;
        case 1: l = {LayerKind::sliding_window, static_cast<int32_t>(rng.range(0, 2 * ps + 2)), 0}; break;
        default: l = {LayerKind::chunked, 0, ps * static_cast<int32_t>(rng.range(1, 4))}; break;
      }
      break;
    }
    case 1:
      if (m.layers.size() < 4) m.layers.push_back(m.layers[rng.below(m.layers.size())]);
      break;
    case 2: m.softcap = m.softcap > 0 ? 0.0 : 30.0; break;
    case 3:
      if (!m.mla) {
        m.kv_heads = 1 << rng.below(3);
        m.q_heads = m.kv_heads << rng.below(3);
      }
      break;
    default: {
      static constexpr DType kTypes[] = {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3};
      s.values.dtype = kTypes[rng.below(4)];
      s.values.seed = rng.next();
      break;
    }
  }
}

}  // namespace

Scenario decode_case(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    Scenario s = scenario_from_json(text);
    validate(s);
    return s;
  } catch (const InvalidCase&) {
    return generate(hash_tag(text), Profile::tiny);
  }
}

void mutate(Scenario& s, Rng& rng) {
  for (int attempt = 0; attempt < 32; ++attempt) {
    Scenario c = s;
    switch (rng.below(4)) {
      case 0: mutate_cache(c, rng); break;
      case 1: mutate_history(c, rng); break;
      case 2: mutate_batch(c, rng); break;
      default: mutate_model(c, rng); break;
    }
    if (!(c == s) && is_valid(c)) {
      s = std::move(c);
      return;
    }
  }
}

}  // namespace kvfuzz
