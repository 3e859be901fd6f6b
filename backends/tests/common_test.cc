// The pieces every backend shares: checked buffers, address arithmetic, the drafting layout, the
// softmax and merge arithmetic, pools and the checked K/V writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/common/attention_math.h"
#include "backends/common/checked_buffer.h"
#include "backends/common/kv_pools.h"
#include "backends/common/paged_view.h"
#include "backends/kv_store.h"
#include "reference/draft_layout.h"
#include "reference/forward_batch.h"
#include "reference/generate.h"

namespace kvfuzz {
namespace {

TEST(Buffer, ChecksEveryIndexAgainstItsCapacity) {
  Buffer<int32_t> b("kv_indices", 4, 7);
  EXPECT_EQ(b[3], 7);
  b.set(0, 1);
  EXPECT_EQ(b[0], 1);
  try {
    b.set(4, 1);
    ADD_FAILURE() << "write past the capacity accepted";
  } catch (const Violation& v) {
    EXPECT_STREQ(v.what(), "kv_indices: write at index 4, outside its capacity 4");
  }
  EXPECT_THROW(b[-1], Violation);
}

TEST(Buffer, GuardZonesCatchRawOverruns) {
  Buffer<int64_t> b("page_table", 8);
  EXPECT_NO_THROW(b.check_guards());
  b.data()[8] = 3;  // one past the end through the raw pointer
  EXPECT_THROW(b.check_guards(), Violation);
  Buffer<int64_t> c("page_table", 8);
  c.data()[-1] = 3;
  EXPECT_THROW(c.check_guards(), Violation);
}

TEST(DraftLayout, BranchesOwnPageRegionsWithTheirTailCopy) {
  // seq_len 6, ps 4, topk 2, 3 steps: the last page holds 2 tokens, 2 pages per branch from
  // column 4; branch 1's region is columns 12..19, its tail copy 12, 13, its drafts 14, 15, 16.
  constexpr DraftLayout l = draft_layout(6, 4, 2, 3);
  static_assert(l.base == 4 && l.region == 8 && l.tail == 2 && l.end_column() == 20);
  EXPECT_EQ(l.column(0, 0), 6);
  EXPECT_EQ(l.column(1, 0), 14);
  EXPECT_EQ(l.column(1, 2), 16);
  EXPECT_EQ(l.tail_column(1, 1), 13);
  EXPECT_EQ(l.logical_column(1, 2), 11);
  // Key 5 of branch 1's row (prefix, then its drafts): column 5 itself for token tables, the
  // region's copy 13 for page tables; key 7 is step 1, column 15 either way.
  EXPECT_EQ(l.key_column(1, 5, 1), 5);
  EXPECT_EQ(l.key_column(1, 5, 4), 13);
  EXPECT_EQ(l.key_column(1, 7, 1), 15);
  EXPECT_EQ(l.key_column(1, 7, 4), 15);
  EXPECT_EQ(l.key_logical_column(1, 7), 10);
  // Page size 1 or one branch: packed by steps, no copies.
  EXPECT_EQ(draft_layout(6, 1, 2, 3).column(1, 2), 11);
  EXPECT_EQ(draft_layout(6, 4, 1, 3).column(0, 2), 8);
  EXPECT_EQ(draft_layout(6, 4, 1, 3).end_column(), 9);
  EXPECT_EQ(draft_layout(6, 1, 2, 3).key_column(1, 7, 1), 10);
  // No steps: every key of every branch row is its own column.
  EXPECT_EQ(draft_layout(6, 4, 1, 0).key_column(1, 7, 4), 7);
}

TEST(PagedView, StrideThenDivideAddresses) {
  // Request pages 5, 2 (page size 4): key 6 is page 2, offset 2 -> slot 10.
  const int32_t table[] = {0, 0, 5, 2};
  EXPECT_EQ(page_table_slot(table, 2, 6, 4), 10);
  EXPECT_EQ(page_table_slot(table, 2, 3, 4), 23);
  EXPECT_EQ(paged_csr_slot(table, 2, 6, 4), 10);
  EXPECT_EQ(paged_csr_length(2, 3, 4), 7);
  EXPECT_EQ(paged_csr_length(0, 3, 4), 0);
  EXPECT_EQ(causal_last_key(10, 3, 0), 7);
}

TEST(SoftmaxAccumulator, MatchesTheDirectFormula) {
  // 150 keys: three tiles, so the per-tile rescaling is exercised.
  const int n = 150, vd = 3;
  std::vector<float> s(n), v(n * vd);
  for (int i = 0; i < n; ++i) {
    s[i] = std::sin(0.37f * i) * 4.0f;
    for (int d = 0; d < vd; ++d) v[i * vd + d] = std::cos(0.11f * i + d);
  }
  SoftmaxAccumulator acc(vd, DType::fp32);
  for (int i = 0; i < n; ++i) acc.add(s[i], &v[i * vd]);
  float out[vd], lse;
  acc.finish(out, &lse);
  double m = -1e30, l = 0, o[vd] = {0, 0, 0};
  for (float x : s) m = std::max(m, static_cast<double>(x));
  for (int i = 0; i < n; ++i) {
    const double p = std::exp(s[i] - m);
    l += p;
    for (int d = 0; d < vd; ++d) o[d] += p * v[i * vd + d];
  }
  for (int d = 0; d < vd; ++d) EXPECT_NEAR(out[d], o[d] / l, 1e-6);
  EXPECT_NEAR(lse, m + std::log(l), 1e-5);
}

TEST(SoftmaxAccumulator, NoKeyGivesZeroAndMinusInfinity) {
  SoftmaxAccumulator acc(2, DType::bf16);
  float out[2] = {5, 5}, lse = 0;
  acc.finish(out, &lse);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(lse, -std::numeric_limits<float>::infinity());
}

TEST(MergeStates, CombinesDisjointPartsAndIgnoresEmptyOnes) {
  const float inf = std::numeric_limits<float>::infinity();
  const float a[1] = {1.0f}, b[1] = {3.0f};
  float out[1], lse;
  merge_states(a, 0.0f, b, 0.0f, 1, out, &lse);  // equal mass
  EXPECT_FLOAT_EQ(out[0], 2.0f);
  EXPECT_FLOAT_EQ(lse, std::log(2.0f));
  merge_states(a, 1.5f, b, -inf, 1, out, &lse);  // a part that saw no key
  EXPECT_FLOAT_EQ(out[0], 1.0f);
  EXPECT_FLOAT_EQ(lse, 1.5f);
  merge_states(a, -inf, b, -inf, 1, out, &lse);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(lse, -inf);
}

Scenario decode_case() {
  Scenario s;
  s.model = {2, 1, 4, 4, false, 0.5, 0.0, {{LayerKind::full, 0, 0}}, {}};
  s.cache = {4, 8, 0, 2, 32, false};
  s.history = {{OpKind::admit, 0, 0, {}, {}}, {OpKind::extend, 0, 5, {}, {}}};
  s.batch.mode = Mode::decode;
  s.batch.entries = {{0, 0, {}}};
  return s;
}

TEST(KvPools, PoisonEverySlotNoLiveTokenOwns) {
  const Scenario s = decode_case();
  const Prepared p = prepare(s);
  const KvPools pools(s, p.cache, ValueSource(s));
  const KvPool& pool = pools.layer(0);
  EXPECT_TRUE(std::isnan(pool.k(0, 0, {})[0]));                  // the dummy page
  EXPECT_FALSE(std::isnan(pool.k(p.cache.r2t(1, 0), 0, {})[0]));  // a live token
  EXPECT_TRUE(std::isnan(pool.k(p.cache.r2t(1, 5) + 1, 0, {})[0]));  // past the end of the last page
  EXPECT_THROW(pool.k(pool.num_slots, 0, {}), Violation);
}

// Storage is sparse: a written row reads back, every slot never written reads the fill (the
// poison pattern), only written blocks are stored, and slots outside the pool still throw.
TEST(KvPools, SparseStorageReadsWrittenRowsAndTheFillElsewhere) {
  Scenario s = decode_case();
  s.cache.full_pages = 1 << 16;  // 2^18 slots, of which 6 hold tokens
  const Prepared p = prepare(s);
  Poison poison;
  poison.k = 3.0f;
  poison.v_row.assign(static_cast<size_t>(s.model.kv_heads * s.model.v_head_dim), 0.0f);
  poison.v_row[1] = 7.0f;
  const ValueSource values(s);
  KvPools pools(s, p.cache, value_fn(values), poison);
  KvPool& pool = pools.layer(0);
  const int64_t live = p.cache.r2t(1, 0), far = pool.num_slots - 1;
  std::vector<float> want(static_cast<size_t>(s.model.head_dim));
  values.fill(0, Tensor::k, 0, 0, 0, want);
  EXPECT_EQ(0, std::memcmp(pool.k(live, 0, {}), want.data(), want.size() * sizeof(float)));
  EXPECT_EQ(pool.k(far, 0, {})[0], 3.0f);
  EXPECT_EQ(pool.v(far, 0, {})[1], 7.0f);
  EXPECT_EQ(pool.v(far, 0, {})[0], 0.0f);
  const std::vector<int64_t> before = pool.stored_slots();
  EXPECT_LE(before.size(), static_cast<size_t>(2 * KvPool::kBlockSlots));
  EXPECT_TRUE(std::binary_search(before.begin(), before.end(), live));

  std::vector<float> k(static_cast<size_t>(s.model.head_dim), 5.0f), v(static_cast<size_t>(s.model.v_head_dim), 6.0f);
  pool.write(far, 0, k.data(), v.data(), {});
  EXPECT_EQ(pool.k(far, 0, {})[0], 5.0f);
  EXPECT_EQ(pool.v(far, 0, {})[1], 6.0f);
  EXPECT_EQ(pool.k(far - 1, 0, {})[0], 3.0f);  // the same block, not written
  const std::vector<int64_t> after = pool.stored_slots();
  EXPECT_TRUE(std::binary_search(after.begin(), after.end(), far));
  EXPECT_TRUE(std::is_sorted(after.begin(), after.end()));
  EXPECT_THROW(pool.k(pool.num_slots, 0, {}), Violation);
  EXPECT_THROW(pool.v(-1, 0, {}), Violation);
  EXPECT_THROW(pool.write(pool.num_slots, 0, k.data(), v.data(), {}), Violation);
}

TEST(KvStore, WritesOnlyTheTokensOwnSlot) {
  const Scenario s = decode_case();
  Prepared p = prepare(s);
  const ValueSource values(s);
  KvPools pools(s, p.cache, values);
  const BatchTensors tensors(s, p.batch, values);
  RunInput in{s, p.cache, p.batch, pools, tensors};
  EXPECT_NO_THROW(store_new_kv(0, step_cache_locs(p.batch), in));
  std::vector<int64_t> wrong = step_cache_locs(p.batch);
  wrong[0] -= 1;  // the previous token's slot
  try {
    store_new_kv(0, wrong, in);
    ADD_FAILURE() << "a write to another token's slot was accepted";
  } catch (const Violation& v) {
    EXPECT_NE(std::string(v.what()).find("which holds request 0, column 4"), std::string::npos) << v.what();
  }
}

}  // namespace
}  // namespace kvfuzz
