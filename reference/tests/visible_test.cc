// The oracle's visibility rule (logical.h `visible`, SEMANTICS.md §3), against sets worked out by
// hand from the rule's text — not from the code: a window of radius W keeps the W + 1 positions
// [P - W, P]; a chunk of C keeps [floor(P / C) * C, P]; a spec-tree draft sees the prefix, its
// ancestors and itself; window and chunk then cut the tree's keys by position.
#include <gtest/gtest.h>

#include "reference/forward_batch.h"
#include "reference/logical.h"
#include "reference/validate.h"

namespace kvfuzz {
namespace {

const Layer kFull{LayerKind::full, 0, 0};

// One request with `committed` tokens, then `batch`; page size 1, room to spare.
Scenario one_request(int32_t committed, const Batch& batch) {
  Scenario s;
  s.model = {1, 1, 4, 4, false, 0.5, 0.0, {kFull}, {}};
  s.cache = {1, 64, 0, 2, 32, false};
  s.history = {{OpKind::admit, 0, 0, {}, {}}, {OpKind::extend, 0, committed, {}, {}}};
  s.batch = batch;
  validate(s);
  return s;
}

VisibleSet visible_of(const Scenario& s, const Layer& layer, int32_t q) {
  return visible(layer, derive_logical(s).rows.at(0), q);
}

int32_t count(const VisibleSet& v) {
  int32_t n = 0;
  for (const ColumnRange& r : v) n += r.end - r.begin;
  return n;
}

TEST(Visible, AWindowOfRadiusWKeepsWPlusOneKeys) {
  Batch decode;
  decode.mode = Mode::decode;
  decode.entries = {{0, 0, {}}};
  const Scenario s = one_request(10, decode);  // the query is column 10 at position 10
  // W = 3 (sliding_window 4): positions 7, 8, 9, 10.
  EXPECT_EQ(visible_of(s, {LayerKind::sliding_window, 3, 0}, 0), (VisibleSet{{7, 11}}));
  // W = 0: the query alone.
  EXPECT_EQ(visible_of(s, {LayerKind::sliding_window, 0, 0}, 0), (VisibleSet{{10, 11}}));
  // W at or past the start: everything, 11 keys (not W + 1).
  EXPECT_EQ(visible_of(s, {LayerKind::sliding_window, 10, 0}, 0), (VisibleSet{{0, 11}}));
  EXPECT_EQ(visible_of(s, {LayerKind::sliding_window, 50, 0}, 0), (VisibleSet{{0, 11}}));
  for (int32_t w = 0; w <= 12; ++w)
    EXPECT_EQ(count(visible_of(s, {LayerKind::sliding_window, w, 0}, 0)), std::min(w, 10) + 1) << "W = " << w;
}

TEST(Visible, ExtendIsCausalAndChunksStartAtMultiplesOfC) {
  Batch extend;
  extend.mode = Mode::extend;
  extend.entries = {{0, 3, {}}};
  const Scenario s = one_request(6, extend);  // queries: columns 6, 7, 8 at positions 6, 7, 8
  EXPECT_EQ(visible_of(s, kFull, 0), (VisibleSet{{0, 7}}));
  EXPECT_EQ(visible_of(s, kFull, 2), (VisibleSet{{0, 9}}));
  const Layer chunk4{LayerKind::chunked, 0, 4};
  EXPECT_EQ(visible_of(s, chunk4, 0), (VisibleSet{{4, 7}}));  // chunk [4, 8)
  EXPECT_EQ(visible_of(s, chunk4, 1), (VisibleSet{{4, 8}}));
  EXPECT_EQ(visible_of(s, chunk4, 2), (VisibleSet{{8, 9}}));  // a new chunk: itself only
  const Layer chunk3{LayerKind::chunked, 0, 3};
  EXPECT_EQ(visible_of(s, chunk3, 0), (VisibleSet{{6, 7}}));  // chunk [6, 9)
  EXPECT_EQ(visible_of(s, chunk3, 2), (VisibleSet{{6, 9}}));
}

TEST(Visible, TreeDraftsSeeThePrefixTheirAncestorsAndThemselves) {
  // Prefix of 5 (columns 0..4). Tree: 0 root; 1 and 2 children of 0; 3 child of 1. Drafts are
  // columns 5..8 at positions 5 + depth: 5, 6, 6, 7.
  Batch verify;
  verify.mode = Mode::target_verify;
  verify.draft_tokens = 4;
  verify.topk = 2;
  verify.entries = {{0, 0, {-1, 0, 0, 1}}};
  const Scenario s = one_request(5, verify);
  EXPECT_EQ(visible_of(s, kFull, 0), (VisibleSet{{0, 6}}));
  EXPECT_EQ(visible_of(s, kFull, 1), (VisibleSet{{0, 7}}));
  EXPECT_EQ(visible_of(s, kFull, 2), (VisibleSet{{0, 6}, {7, 8}}));  // not its sibling 1
  EXPECT_EQ(visible_of(s, kFull, 3), (VisibleSet{{0, 7}, {8, 9}}));  // 0, 1, itself
  // Window W = 2 at draft 3 (position 7): positions 5, 6, 7 = drafts 0, 1, 3, no prefix.
  EXPECT_EQ(visible_of(s, {LayerKind::sliding_window, 2, 0}, 3), (VisibleSet{{5, 7}, {8, 9}}));
  // W = 2 at draft 2 (position 6): prefix position 4, then drafts 0 and 2.
  EXPECT_EQ(visible_of(s, {LayerKind::sliding_window, 2, 0}, 2), (VisibleSet{{4, 6}, {7, 8}}));
  // Chunk 4 at draft 3 (position 7): positions 4.. = prefix column 4, drafts 0, 1, 3.
  EXPECT_EQ(visible_of(s, {LayerKind::chunked, 0, 4}, 3), (VisibleSet{{4, 7}, {8, 9}}));
}

// draft_q_only (vLLM's Gemma-4 drafting step): one query at the last committed position, over the
// committed keys, nothing new. 10 committed: the query is column 9 at position 9 and sees [0, 10);
// a window of radius 3 keeps positions 6..9. The forward batch writes nothing and reads 10 keys.
TEST(Visible, AQOnlyDraftStepReadsTheCommittedKeysUpToItsOwnPosition) {
  Batch q_only;
  q_only.mode = Mode::draft_q_only;
  q_only.entries = {{0, 0, {}}};
  q_only.draft_steps = 3;
  q_only.draft_step = 2;
  const Scenario s = one_request(10, q_only);
  const LogicalRow row = derive_logical(s).rows.at(0);
  EXPECT_EQ(row.kv_cols, 10);
  ASSERT_EQ(row.queries.size(), 1u);
  EXPECT_EQ(row.queries[0].position, 9);
  EXPECT_EQ(visible_of(s, kFull, 0), (VisibleSet{{0, 10}}));
  EXPECT_EQ(visible_of(s, {LayerKind::sliding_window, 3, 0}, 0), (VisibleSet{{6, 10}}));
  const ForwardBatch fb = prepare(s).batch;
  EXPECT_EQ(fb.seq_lens, (std::vector<int32_t>{10}));
  EXPECT_EQ(fb.positions, (std::vector<int32_t>{9}));
  EXPECT_EQ(fb.token_columns, (std::vector<int32_t>{9}));
  EXPECT_TRUE(fb.out_cache_loc.empty());
  q_only.draft_step = 3;  // past the loop's steps
  EXPECT_THROW(one_request(10, q_only), InvalidCase);
}

// A drafting step runs before its target step's SWA pages are evicted: an eviction that freed the
// page holding the oldest key of position seq_len - 1's window (radius 3, pages of 4) is a case
// production cannot reach; one that left it is not.
TEST(Visible, AQOnlyDraftStepAfterAnEvictionOfItsWindowIsInvalid) {
  Scenario s;
  s.model = {1, 1, 4, 4, false, 0.5, 0.0, {{LayerKind::sliding_window, 3, 0}}, {}};
  s.cache = {4, 16, 8, 2, 32, false};
  s.batch.mode = Mode::draft_q_only;
  s.batch.entries = {{0, 0, {}}};
  s.batch.draft_steps = 2;
  for (int32_t committed : {7, 8}) {
    // 7: columns 0..3 evicted (below 7 - 3 = 4), the step at position 6 reads from column 3
    // 8: the same pages evicted, the step at position 7 reads from column 4
    s.history = {
        {OpKind::admit, 0, 0, {}, {}}, {OpKind::extend, 0, committed, {}, {}}, {OpKind::swa_evict, 0, 0, {}, {}}};
    if (committed == 7) {
      EXPECT_THROW(validate(s), InvalidCase);
    } else {
      validate(s);
      EXPECT_EQ(prepare(s).batch.positions, (std::vector<int32_t>{7}));
    }
  }
}

}  // namespace
}  // namespace kvfuzz
