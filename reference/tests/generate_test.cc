// The generator: deterministic to the byte, and it reaches the corners that break backends.
#include <gtest/gtest.h>

#include <set>

#include "reference/forward_batch.h"
#include "reference/generate.h"
#include "reference/rng.h"
#include "reference/scenario_json.h"
#include "reference/tests/test_level.h"

namespace kvfuzz {
namespace {

uint64_t fingerprint(const std::string& text) { return hash_tag(text); }

TEST(Generate, SameSeedSameBytes) {
  for (uint64_t seed = 0; seed < 50; ++seed) {
    for (Profile p : {Profile::tiny, Profile::small, Profile::medium, Profile::large}) {
      ASSERT_EQ(to_json(generate(seed, p)), to_json(generate(seed, p))) << seed;
    }
  }
}

// These fingerprints pin the generator's output. They must match for every compiler and machine
// (the clang fuzz build runs this test too); change them only with a deliberate generator change,
// which invalidates seeds users have recorded.
TEST(Generate, MatchesRecordedFingerprints) {
  const std::pair<uint64_t, uint64_t> golden[] = {
      {1, 0x60ee2cb911481c6bULL},
      {2, 0x6e0a89730b5cc4cfULL},
      {3, 0x516e0be7a40204d6ULL},
  };
  for (const auto& [seed, want] : golden) {
    EXPECT_EQ(fingerprint(to_json(generate(seed, Profile::small))), want)
        << "seed " << seed << ": 0x" << std::hex << fingerprint(to_json(generate(seed, Profile::small)));
  }
}

// The gpt-oss profile: the same bytes for a seed, and every case gpt-oss-shaped: 8 q heads per KV
// head, a sink per q head, sliding-window layers alternating with full ones. Other profiles draw
// no sinks (their fingerprints above are unchanged).
TEST(Generate, GptOssProfileDrawsSinksPerQHead) {
  for (uint64_t seed = 0; seed < static_cast<uint64_t>(testing::test_cases(30)); ++seed) {
    const Scenario s = generate(seed, Profile::gpt_oss);
    ASSERT_EQ(to_json(s), to_json(generate(seed, Profile::gpt_oss))) << seed;
    ASSERT_EQ(s.model.sinks.size(), static_cast<size_t>(s.model.q_heads)) << seed;
    if (s.model.layers.size() < 2) continue;  // the last-resort case
    EXPECT_EQ(s.model.q_heads, 8 * s.model.kv_heads) << seed;
    EXPECT_EQ(s.model.layers[0].kind, LayerKind::sliding_window) << seed;
    EXPECT_EQ(s.model.layers[1].kind, LayerKind::full) << seed;
    for (const Layer& l : s.model.layers) {  // one window for every banded layer, as gpt-oss has
      if (l.kind == LayerKind::sliding_window) {
        EXPECT_EQ(l.window, s.model.layers[0].window) << seed;
      }
    }
    EXPECT_TRUE(generate(seed, Profile::small).model.sinks.empty()) << seed;
  }
  EXPECT_EQ(parse_profile("gpt-oss"), Profile::gpt_oss);
}

// The gemma4 profile: the same bytes for a seed, gpt-oss's layers without sinks, and no decode,
// verify or draft_decode step: each became draft_q_only (topk 1, a step of its loop); it draws them.
TEST(Generate, Gemma4ProfileDrawsQOnlyDraftSteps) {
  int32_t q_only = 0;
  for (uint64_t seed = 0; seed < static_cast<uint64_t>(testing::test_cases(40)); ++seed) {
    const Scenario s = generate(seed, Profile::gemma4);
    ASSERT_EQ(to_json(s), to_json(generate(seed, Profile::gemma4))) << seed;
    EXPECT_TRUE(s.model.sinks.empty()) << seed;
    const Mode m = s.batch.mode;
    if (s.model.layers.size() < 2) continue;  // the last-resort case
    EXPECT_TRUE(m != Mode::decode && m != Mode::target_verify && m != Mode::draft_decode) << seed;
    if (m != Mode::draft_q_only) continue;
    ++q_only;
    EXPECT_EQ(s.batch.topk, 1) << seed;
    EXPECT_LT(s.batch.draft_step, s.batch.draft_steps) << seed;
  }
  EXPECT_GT(q_only, 0);
  EXPECT_EQ(parse_profile("gemma4"), Profile::gemma4);
}

// The long profile: the same bytes for a seed, a request of at least 2^17 keys, a K pool of more
// than 2^31 elements per layer, and pages of that request on both sides of element offset 2^31.
TEST(Generate, LongReachesPastInt32Offsets) {
  for (uint64_t seed = 0; seed < static_cast<uint64_t>(testing::test_cases(6)); ++seed) {
    const Scenario s = generate(seed, Profile::long_);
    ASSERT_EQ(to_json(s), to_json(generate(seed, Profile::long_))) << seed;
    const Prepared p = prepare(s);
    const int64_t width = int64_t{s.model.kv_heads} * s.model.head_dim;
    EXPECT_GT(p.cache.full_slots * width, int64_t{1} << 31) << seed;
    int32_t longest = 0, row = -1;
    for (int32_t i = 0; i < p.batch.bs; ++i) {
      if (p.batch.seq_lens[static_cast<size_t>(i)] > longest) {
        longest = p.batch.seq_lens[static_cast<size_t>(i)];
        row = p.batch.req_pool_indices[static_cast<size_t>(i)];
      }
    }
    EXPECT_GE(longest, 131072) << seed;
    int64_t low = 0, high = 0;
    for (int32_t column = 0; column < longest; ++column) {
      const int64_t offset = int64_t{p.cache.r2t(row, column)} * width;
      (offset >= (int64_t{1} << 31) ? high : low) += 1;
    }
    EXPECT_GT(high, 0) << seed << ": no key of the long request at element offset 2^31 or above";
    EXPECT_GT(low, 0) << seed;
  }
}

TEST(Generate, ReachesTheCorners) {
  std::set<Mode> modes;
  std::set<OpKind> ops;
  std::set<int32_t> page_sizes;
  int odd_page = 0, reused = 0, swa_diverged = 0, evicted = 0, wide_tree = 0, padded = 0, boundary = 0;
  const int n = static_cast<int>(testing::test_cases(400));
  for (int seed = 0; seed < n; ++seed) {
    const Scenario s = generate(static_cast<uint64_t>(seed), Profile::small);
    const int32_t ps = s.cache.page_size;
    modes.insert(s.batch.mode);
    page_sizes.insert(ps);
    odd_page += ps % 2 == 1 && ps > 1;
    for (const Op& op : s.history) ops.insert(op.kind);
    padded += s.batch.graph_bs > static_cast<int32_t>(s.batch.entries.size());
    if (s.batch.topk > 1 && s.batch.mode == Mode::target_verify) ++wide_tree;
    for (const BatchEntry& e : s.batch.entries) boundary += e.extend_len > 1 && (e.extend_len % ps <= 1 || e.extend_len % ps == ps - 1);

    const Prepared p = prepare(s);
    bool saw_reuse = false, saw_diverged = false, saw_evicted = false;
    for (const auto& [id, r] : p.cache.requests) {
      for (int32_t c = 0; c + 1 < r.seq_len; ++c) saw_reuse |= p.cache.r2t(r.row, c + 1) < p.cache.r2t(r.row, c);
      if (!p.cache.hybrid) continue;
      saw_evicted |= r.swa_evicted > 0;
      for (int32_t c = r.swa_evicted; c < r.seq_len; ++c)
        saw_diverged |= p.cache.full_to_swa[static_cast<size_t>(p.cache.r2t(r.row, c))] != p.cache.r2t(r.row, c);
    }
    reused += saw_reuse;
    swa_diverged += saw_diverged;
    evicted += saw_evicted;
  }
  EXPECT_EQ(modes.size(), 7u);
  EXPECT_EQ(ops.size(), 8u);  // every OpKind, share included
  EXPECT_GE(page_sizes.size(), 8u);
  // Each corner in a good share of cases (the counts are over n cases).
  EXPECT_GT(odd_page, n / 20);
  EXPECT_GT(reused, n / 10) << "non-monotonic tables from reuse after free";
  EXPECT_GT(swa_diverged, n / 20) << "SWA mapping that is not the identity";
  EXPECT_GT(evicted, n / 40) << "evicted SWA tokens";
  EXPECT_GT(wide_tree, n / 40) << "topk > 1 trees";
  EXPECT_GT(padded, n / 10) << "CUDA-graph padding";
  EXPECT_GT(boundary, n / 20) << "extends ending at page boundaries";
}

TEST(Generate, ProfilesGrow) {
  auto tokens = [](Profile p) {
    int64_t total = 0;
    for (uint64_t seed = 0; seed < 40; ++seed) {
      const Scenario s = generate(seed, p);
      for (const Op& op : s.history) total += op.len;
    }
    return total;
  };
  EXPECT_LT(tokens(Profile::tiny), tokens(Profile::small));
  EXPECT_LT(tokens(Profile::small), tokens(Profile::medium));
}

}  // namespace
}  // namespace kvfuzz
