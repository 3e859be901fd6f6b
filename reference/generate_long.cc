// Generation of a `long` case: scale that only a GPU reaches. Part of generate.h.
//
// One request holds at least 2^17 = 131072 keys (corners 131071 + 1, 131072, 131073 and page
// boundaries), in a full pool of more than 2^31 elements per layer's K pool, so real kernels'
// 32-bit index arithmetic meets offsets it cannot hold. The allocator history puts the long
// request's pages there: it takes a head of its context low in the pool, a filler request then
// takes and frees page after page (freed pages wait on the release list, or go to the back of the
// FIFO free list at page size 1), so the free list's front climbs to just below the slot whose
// element offset slot x kv_heads x head_dim is 2^31, and the rest of the context lands on both
// sides of it. Pools are sparse (backends/common/kv_pools.h): the freed filler pages cost nothing,
// a case costs what its live tokens hold.
#include <algorithm>
#include <cmath>

#include "reference/generate.h"
#include "reference/limits.h"

namespace kvfuzz {
namespace {

constexpr int32_t kFiller = 3;  // the request id that walks the free list up (batch requests are 0..2)

// Heads x dims of real kernels whose K pool row is at least 256 elements wide, so the pool past
// 2^31 elements is at most 2^23 + a few pages of slots (the simulator keeps O(slots) state).
Model long_model(Rng& rng, int32_t page_size) {
  static constexpr int32_t kShapes[][2] = {{2, 128}, {4, 64}, {4, 128}, {8, 64}, {8, 128}};
  const auto& shape = kShapes[rng.below(std::size(kShapes))];
  Model m;
  m.kv_heads = shape[0];
  m.q_heads = m.kv_heads << rng.below(static_cast<uint64_t>(m.kv_heads == 8 ? 1 : m.kv_heads == 4 ? 2 : 3));
  m.head_dim = m.v_head_dim = shape[1];
  m.sm_scale = rng.chance(1, 2) ? 1.0 / std::sqrt(static_cast<double>(m.head_dim)) : 0.125;
  m.softcap = rng.chance(1, 6) ? 30.0 : 0.0;
  m.layers = {Layer{}};
  if (rng.chance(2, 3)) {
    Layer l;
    if (rng.chance(2, 3)) {
      // Windows at page boundaries, a typical 4K one, and one that covers the whole context.
      const int32_t windows[] = {page_size - 1, page_size, page_size + 1, 4095, 131071};
      l.kind = LayerKind::sliding_window;
      l.window = std::max(0, windows[rng.below(std::size(windows))]);
    } else {
      l.kind = LayerKind::chunked;
      l.chunk = rng.chance(1, 2) ? 8192 : 65536;  // multiples of every long page size
    }
    m.layers.insert(m.layers.begin() + static_cast<std::ptrdiff_t>(rng.below(2)), l);
  }
  return m;
}

// Keys of the long request at the batch step: 2^17 and the corners past it.
int32_t long_keys(Rng& rng, int32_t page_size) {
  constexpr int32_t k = 131072;
  const int32_t corners[] = {
      k, k, k + 1, k + page_size - 1, k + page_size, k + page_size + 1, k + static_cast<int32_t>(rng.range(2, 8192))};
  return corners[rng.below(std::size(corners))];
}

int32_t pages_for(int64_t tokens, int32_t page_size) {
  return static_cast<int32_t>((tokens + page_size - 1) / page_size);
}

}  // namespace

Scenario generate_long(Rng rng) {
  Scenario s;
  CacheConfig& c = s.cache;
  static constexpr int32_t kPageSizes[] = {1, 16, 64};
  const int32_t ps = c.page_size = kPageSizes[rng.below(std::size(kPageSizes))];
  s.model = long_model(rng, ps);
  const int64_t width = int64_t{s.model.kv_heads} * s.model.head_dim;
  const int64_t top_slot = (int64_t{1} << 31) / width;  // the first slot at element offset 2^31
  const int32_t top_page = static_cast<int32_t>(top_slot / ps);

  // The batch: the long request 0 and up to two short ones.
  Batch& b = s.batch;
  static constexpr Mode kModes[] = {Mode::decode, Mode::decode, Mode::extend, Mode::extend, Mode::mixed};
  b.mode = kModes[rng.below(std::size(kModes))];
  const auto batch_size = static_cast<int32_t>(rng.range(1, 3));
  std::vector<int32_t> step(static_cast<size_t>(batch_size), 1);  // new tokens per request
  for (int32_t id = 0; id < batch_size; ++id) {
    const bool extend = b.mode == Mode::extend || (b.mode == Mode::mixed && rng.chance(1, 2));
    if (extend) step[static_cast<size_t>(id)] = corner_length(rng, ps, id == 0 ? 16 : 64);
  }
  if (b.mode == Mode::mixed && step[0] == 1 && batch_size == 1) b.mode = Mode::decode;
  const int32_t keys = long_keys(rng, ps);
  const int32_t prefix = keys - step[0];
  std::vector<int32_t> short_prefix(static_cast<size_t>(batch_size), 0);
  for (int32_t id = 1; id < batch_size; ++id) short_prefix[static_cast<size_t>(id)] = corner_length(rng, ps, 4096);

  c.max_context_len = limits::kMaxContextLen;
  c.max_requests = kFiller + 1;
  c.sort_free = ps > 1 || rng.chance(1, 2);  // paged LIFO would hand the filler's pages back first

  // The history, with the free list's front (the next page taken) tracked alongside.
  std::vector<Op>& h = s.history;
  int32_t front = 1;
  auto admit_extend = [&](int32_t id, int32_t len) {
    h.push_back({OpKind::admit, id, 0, {}, {}});
    if (len == 0) return;
    h.push_back({OpKind::extend, id, len, {}, {}});
    front += pages_for(len, ps);
  };
  // The long request's head, low in the pool; short requests low or high.
  const int32_t head = std::clamp(corner_length(rng, ps, prefix / 2), 1, prefix - 1);
  admit_extend(0, head);
  const bool shorts_low = rng.chance(1, 2);
  if (shorts_low)
    for (int32_t id = 1; id < batch_size; ++id) admit_extend(id, short_prefix[static_cast<size_t>(id)]);
  // The filler walks the front up to a few pages below the 2^31-element page.
  const int32_t target = top_page - static_cast<int32_t>(rng.range(0, 3)) - pages_for(prefix - head, ps) / 2;
  const int32_t filler_pages = (c.max_context_len - 1) / ps;
  while (front < target) {
    const int32_t pages = std::min(filler_pages, target - front);
    admit_extend(kFiller, pages * ps - static_cast<int32_t>(rng.below(static_cast<uint64_t>(ps))));
    h.push_back({OpKind::free, kFiller, 0, {}, {}});
  }
  // The rest of the long context: its partial last page first, then pages across 2^31 elements.
  const int32_t head_room = pages_for(head, ps) * ps - head;
  h.push_back({OpKind::extend, 0, prefix - head, {}, {}});
  front += pages_for(std::max(0, prefix - head - head_room), ps);
  if (!shorts_low)
    for (int32_t id = 1; id < batch_size; ++id) admit_extend(id, short_prefix[static_cast<size_t>(id)]);

  // The pool: what the history took, the batch step's pages and a little slack.
  int32_t step_pages = 0;
  for (int32_t id = 0; id < batch_size; ++id) step_pages += pages_for(step[static_cast<size_t>(id)], ps) + 1;
  c.full_pages = front - 1 + step_pages + static_cast<int32_t>(rng.range(0, 4));

  for (int32_t id = 0; id < batch_size; ++id)
    b.entries.push_back({id, b.mode == Mode::decode ? 0 : step[static_cast<size_t>(id)], {}});
  std::rotate(b.entries.begin(),
              b.entries.begin() + static_cast<std::ptrdiff_t>(rng.below(static_cast<uint64_t>(batch_size))),
              b.entries.end());
  b.graph_bs = rng.chance(1, 3) ? batch_size + static_cast<int32_t>(rng.range(0, 2)) : 0;
  b.kv_splits = rng.chance(1, 2) ? 1 : static_cast<int32_t>(rng.range(2, 16));
  return s;
}

}  // namespace kvfuzz
