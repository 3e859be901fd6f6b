// The cache simulator: production allocation rules, and the invariants of SEMANTICS.md §1 over
// generated allocator histories.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <map>

#include "reference/allocator.h"
#include "reference/forward_batch.h"
#include "reference/generate.h"
#include "reference/logical.h"
#include "reference/shared_prefix.h"

namespace kvfuzz {
namespace {

std::vector<int32_t> take(PageAllocator& a, int32_t n) {
  std::vector<int32_t> out;
  EXPECT_TRUE(a.take(n, out));
  return out;
}

TEST(PageAllocator, StartsInOrderAndSkipsPageZero) {
  PageAllocator a(4, FreePolicy::lifo);
  EXPECT_EQ(take(a, 4), (std::vector<int32_t>{1, 2, 3, 4}));
  std::vector<int32_t> none;
  EXPECT_FALSE(a.take(1, none));
  EXPECT_TRUE(none.empty());
}

TEST(PageAllocator, LifoReusesTheLastFreedFirst) {
  PageAllocator a(6, FreePolicy::lifo);
  take(a, 4);
  a.release(std::vector<int32_t>{3, 1});
  EXPECT_EQ(take(a, 3), (std::vector<int32_t>{1, 3, 5}));
}

TEST(PageAllocator, FifoReusesAfterTheUntouchedPages) {
  PageAllocator a(6, FreePolicy::fifo);
  take(a, 4);
  a.release(std::vector<int32_t>{3, 1});
  EXPECT_EQ(take(a, 4), (std::vector<int32_t>{5, 6, 3, 1}));
}

TEST(PageAllocator, SortedMergesOnlyWhenShort) {
  PageAllocator a(6, FreePolicy::sorted);
  take(a, 4);
  a.release(std::vector<int32_t>{4, 2});
  EXPECT_EQ(take(a, 1), (std::vector<int32_t>{5}));   // the free list suffices
  EXPECT_EQ(take(a, 2), (std::vector<int32_t>{2, 4}));  // {6} is short: merge {6, 4, 2}, sort
  EXPECT_EQ(a.available(), 1);
}

// One request grows, another finishes and its pages are reused: the classic non-monotonic table.
TEST(CacheModel, ReuseAfterFreeGivesNonMonotonicTables) {
  Scenario s;
  s.model.layers = {{LayerKind::full, 0, 0}, {LayerKind::sliding_window, 2, 0}};
  s.model.sm_scale = 1;
  s.cache = {2, 8, 8, 4, 32, false};
  s.history = {{OpKind::admit, 0, 0, {}, {}}, {OpKind::extend, 0, 3, {}, {}},  // pages 1, 2
               {OpKind::admit, 1, 0, {}, {}}, {OpKind::extend, 1, 4, {}, {}},  // pages 3, 4
               {OpKind::free, 0, 0, {}, {}},                                   // 1, 2 back (LIFO)
               {OpKind::extend, 1, 4, {}, {}},                                 // pages 1, 2
               {OpKind::swa_evict, 1, 0, {}, {}}};
  s.batch.mode = Mode::decode;
  s.batch.entries = {{1, 0, {}}};
  const Prepared p = prepare(s);
  const CacheState& c = p.cache;
  const int32_t row = c.requests.at(1).row;
  EXPECT_EQ(row, 2);
  std::vector<int32_t> slots;
  for (int32_t col = 0; col < 9; ++col) slots.push_back(c.r2t(row, col));
  EXPECT_EQ(slots, (std::vector<int32_t>{6, 7, 8, 9, 2, 3, 4, 5, 10}));
  // The SWA pool was identity until the frees; evicting tokens [0, 8 - 2) frees 3 SWA pages and
  // maps those tokens to the dummy slot 0.
  EXPECT_EQ(c.requests.at(1).swa_evicted, 6);
  for (int32_t col = 0; col < 6; ++col) EXPECT_EQ(c.full_to_swa[static_cast<size_t>(slots[col])], 0) << col;
  EXPECT_EQ(c.full_to_swa[4], 4);
  EXPECT_EQ(c.full_to_swa.back(), -1);
  EXPECT_EQ(p.batch.out_cache_loc, (std::vector<int64_t>{10}));
  EXPECT_EQ(p.batch.seq_lens, (std::vector<int32_t>{9}));
}

TEST(CacheModel, AcceptRemapsSlotsAtPageSizeOne) {
  Scenario s;
  s.model.layers = {{}};
  s.model.sm_scale = 1;
  s.cache = {1, 16, 0, 2, 16, false};
  s.history = {{OpKind::admit, 0, 0, {}, {}}, {OpKind::extend, 0, 2, {}, {}},  // slots 1, 2
               {OpKind::draft, 0, 0, {-1, 0, 0, 2}, {}},                       // slots 3, 4, 5, 6
               {OpKind::accept, 0, 0, {}, {0, 2, 3}}};                          // keep 3, 5, 6
  s.batch.mode = Mode::decode;
  s.batch.entries = {{0, 0, {}}};
  const Prepared p = prepare(s);
  const int32_t row = p.cache.requests.at(0).row;
  std::vector<int32_t> slots;
  for (int32_t col = 0; col < 6; ++col) slots.push_back(p.cache.r2t(row, col));
  // FIFO reuse: the freed slot 4 comes after the untouched 7.
  EXPECT_EQ(slots, (std::vector<int32_t>{1, 2, 3, 5, 6, 7}));
  EXPECT_EQ(p.cache.full_content[5], (SlotContent{0, 3, true}));
  EXPECT_FALSE(p.cache.full_content[4].live());
}

TEST(CacheModel, DraftDecodeDuplicatesThePartialPagePerBranch) {
  Scenario s;
  s.model.layers = {{}};
  s.model.sm_scale = 1;
  s.cache = {4, 32, 0, 2, 64, false};
  s.history = {{OpKind::admit, 0, 0, {}, {}}, {OpKind::extend, 0, 6, {}, {}}};  // pages 1, 2; tail 2
  s.batch.mode = Mode::draft_decode;
  s.batch.entries = {{0, 0, {}}};
  s.batch.topk = 2;
  s.batch.draft_steps = 3;
  s.batch.draft_step = 1;
  const Prepared p = prepare(s);
  // Each branch region is ceil((2 + 3) / 4) = 2 pages from column 4: branch 0 at columns 4..11
  // (its first page is the real page 2), branch 1 at 12..19 starting with a copy of the tail.
  const int32_t row = p.cache.requests.at(0).row;
  EXPECT_EQ(p.cache.r2t(row, 12) % 4, 0);
  EXPECT_EQ(p.cache.full_content[static_cast<size_t>(p.cache.r2t(row, 12))], (SlotContent{0, 4, true}));
  EXPECT_EQ(p.cache.full_content[static_cast<size_t>(p.cache.r2t(row, 13))], (SlotContent{0, 5, true}));
  // Branch 1, step u: column 12 + 2 + u, content column 6 + 3 + u; step 2 is not written yet.
  EXPECT_EQ(p.cache.full_content[static_cast<size_t>(p.cache.r2t(row, 15))], (SlotContent{0, 10, true}));
  EXPECT_EQ(p.cache.full_content[static_cast<size_t>(p.cache.r2t(row, 16))], (SlotContent{0, 11, false}));
  EXPECT_EQ(p.batch.out_cache_loc.size(), 6u);
  EXPECT_EQ(p.batch.out_cache_loc[3], p.cache.r2t(row, 14));
  EXPECT_EQ(p.batch.positions, (std::vector<int32_t>{7, 7}));
  EXPECT_EQ(p.batch.token_columns, (std::vector<int32_t>{7, 10}));
}

// Whether a slot's content is (request, column)'s: the same column, written, by the same owner (a
// shared prefix slot names one of its holders; shared_prefix.h).
bool holds(const SlotContent& c, const SharedPrefixes& shared, int32_t request, int32_t column) {
  return c.column == column && c.written && c.live() &&
         shared.owner(c.request, column) == shared.owner(request, column);
}

// The invariants of SEMANTICS.md §1 on every generated history.
RC_GTEST_PROP(CacheModel, KeepsTheProductionLayoutInvariants, ()) {
  const Scenario s = generate(*rc::gen::arbitrary<uint64_t>(), *rc::gen::element(Profile::tiny, Profile::small));
  const Prepared p = prepare(s);
  const CacheState& c = p.cache;
  const SharedPrefixes shared(s.history);
  const int32_t ps = s.cache.page_size;
  std::map<int64_t, int32_t> page_owner;
  for (int64_t slot = 0; slot < c.full_slots; ++slot) {
    const SlotContent& sc = c.full_content[static_cast<size_t>(slot)];
    if (!sc.live()) continue;
    RC_ASSERT(slot >= ps);  // no live slot in page 0
    auto [it, fresh] = page_owner.emplace(slot / ps, shared.owner(sc.request, sc.column));
    RC_ASSERT(it->second == shared.owner(sc.request, sc.column));  // live pages are disjoint across owners
  }
  for (const auto& [id, r] : c.requests) {
    for (int32_t col = 0; col < r.seq_len; ++col) {
      const int32_t slot = c.r2t(r.row, col);
      RC_ASSERT(slot % ps == col % ps);
      RC_ASSERT(holds(c.full_content[static_cast<size_t>(slot)], shared, id, col));
      if (!c.hybrid) continue;
      const int64_t swa = c.full_to_swa[static_cast<size_t>(slot)];
      if (col < r.swa_evicted) {
        RC_ASSERT(swa == 0);  // evicted: the dummy slot
      } else {
        RC_ASSERT(swa >= ps);
        RC_ASSERT(swa % ps == slot % ps);  // equal in-page offsets
        RC_ASSERT(c.swa_content[static_cast<size_t>(swa)] == (SlotContent{id, col, true}));
      }
    }
  }
  if (c.hybrid) RC_ASSERT(c.full_to_swa.back() == -1);
  // Row 0 stays zero for padded rows; padded rows use it.
  for (int32_t col = 0; col < s.cache.max_context_len; ++col) RC_ASSERT(c.r2t(0, col) == 0);
  const ForwardBatch& fb = p.batch;
  for (int32_t i = fb.bs; i < fb.padded_bs; ++i) {
    RC_ASSERT(fb.req_pool_indices[static_cast<size_t>(i)] == 0);
    RC_ASSERT(fb.seq_lens[static_cast<size_t>(i)] == 1);
  }
}

// The batch the simulator prepares says the same as the oracle's independent logical view.
RC_GTEST_PROP(CacheModel, AgreesWithTheLogicalView, ()) {
  const Scenario s = generate(*rc::gen::arbitrary<uint64_t>(), *rc::gen::element(Profile::tiny, Profile::small));
  const Prepared p = prepare(s);
  const SharedPrefixes shared(s.history);
  const LogicalBatch lb = derive_logical(s);
  const ForwardBatch& fb = p.batch;
  RC_ASSERT(static_cast<int32_t>(lb.rows.size()) == fb.bs);
  size_t token = 0;
  for (int32_t i = 0; i < fb.bs; ++i) {
    const LogicalRow& row = lb.rows[static_cast<size_t>(i)];
    RC_ASSERT(fb.request_ids[static_cast<size_t>(i)] == row.request);
    RC_ASSERT(fb.prefix_lens[static_cast<size_t>(i)] == row.prefix_len);
    RC_ASSERT(fb.extend_lens[static_cast<size_t>(i)] == static_cast<int32_t>(row.queries.size()));
    for (const LogicalQuery& q : row.queries) {
      RC_ASSERT(fb.token_columns[token] == q.column);
      RC_ASSERT(fb.positions[token] == q.position);
      ++token;
    }
    // Every committed column of the prefix holds its own content (or its shared prefix's), written.
    const int32_t r2t_row = fb.req_pool_indices[static_cast<size_t>(i)];
    for (int32_t col = 0; col < row.prefix_len; ++col)
      RC_ASSERT(holds(p.cache.full_content[static_cast<size_t>(p.cache.r2t(r2t_row, col))], shared, row.request, col));
  }
}

}  // namespace
}  // namespace kvfuzz
