// root_causes: the findings of one case that follow from each other are one group, named by the
// earliest stage that failed; different bugs keep different groups.
#include <gtest/gtest.h>

#include "properties/root_cause.h"

namespace kvfuzz {
namespace {

Fingerprint fp(std::string property, std::string mode, std::string layer_kind, std::string mechanism,
               std::string backend = "fa") {
  Fingerprint f;
  f.property = std::move(property);
  f.backend = std::move(backend);
  f.planner = f.backend;
  f.mode = std::move(mode);
  f.layer_kind = std::move(layer_kind);
  f.mechanism = std::move(mechanism);
  return f;
}

TEST(RootCause, TheOraclesReadsOfAReadSetAreThatReadSetsGroup) {
  const auto r = root_causes(
      {fp("oracle", "extend", "chunked", "reads:unowned-slot"), fp("in-bounds", "extend", "chunked", "unowned-slot")});
  EXPECT_EQ(r[0].group, "fa: reads: foreign");
  EXPECT_EQ(r[1].group, r[0].group);
  // A different read set on a case of its own is another group.
  EXPECT_NE(root_causes({fp("cache-extent", "extend", "chunked", "missing-oldest")})[0].group, r[0].group);
}

TEST(RootCause, OneDroppedKeyIsOneGroupWhereverTheQuerySits) {
  // An executor that drops a key, seen with no metadata finding: missing-newest on a full layer in
  // decode, missing-all on a window layer in extend, missing-interior+missing-newest in verify.
  const std::string g = root_causes({fp("cache-extent", "decode", "full", "missing-newest")})[0].group;
  EXPECT_EQ(g, "fa: reads: missing");
  EXPECT_EQ(root_causes({fp("oracle", "extend", "sliding_window", "reads:missing-all")})[0].group, g);
  EXPECT_EQ(root_causes({fp("cache-extent", "target_verify", "full", "missing-interior+missing-newest")})[0].group, g);
  // Reads of another request's slots, keys read in addition, a moved window: other groups.
  EXPECT_NE(root_causes({fp("in-bounds", "decode", "full", "other-request")})[0].group, g);
  EXPECT_EQ(root_causes({fp("cache-extent", "decode", "full", "missing-newest+extra-after")})[0].group,
            "fa: reads: extra+missing");
  EXPECT_EQ(root_causes({fp("cache-extent", "decode", "sliding_window", "shifted-older")})[0].group,
            "fa: reads: shifted");
}

TEST(RootCause, AMetadataMessageExplainsTheReadSetOfItsCase) {
  const auto r = root_causes({fp("cache-extent", "draft_extend_v2", "full", "missing-newest"),
                              fp("metadata", "draft_extend_v2", "full",
                                 "draft_extend_vN.cache_seqlens[N] (batch row N) is N, expected N (too small)"),
                              fp("oracle", "draft_extend_v2", "full", "reads:missing-newest")});
  const std::string root = "fa: metadata: cache_seqlens[N] (batch row N) is N, expected N (too small)";
  for (const RootCause& c : r) EXPECT_EQ(c.group, root);
  EXPECT_NE(r[0].why.find("follows from metadata metadata/fa/draft_extend_v2/full: draft_extend_vN.cache_seqlens"),
            std::string::npos)
      << r[0].why;
  EXPECT_NE(r[1].why.find("the root"), std::string::npos) << r[1].why;
}

TEST(RootCause, TheSameRootInAnotherModeOrLayerKindIsTheSameGroup) {
  const auto decode = root_causes({fp("stride-divide", "decode", "chunked", "local_block_table:wrong-slot"),
                                   fp("in-bounds", "decode", "chunked", "other-request")});
  const auto extend = root_causes({fp("stride-divide", "extend", "chunked", "local_block_table:other-column"),
                                   fp("cache-extent", "extend", "chunked", "shifted-newer")});
  EXPECT_EQ(decode[0].group, "fa: table: local_block_table");
  EXPECT_EQ(decode[1].group, decode[0].group);
  EXPECT_EQ(extend[1].group, decode[0].group);
  // The window's metadata derives from the full layer's: the full layer's message is the root.
  const auto both = root_causes(
      {fp("metadata", "draft_extend_v2", "sliding_window",
          "draft_extend_vN.swa.cache_seqlens[N] is N, expected N (too large)"),
       fp("metadata", "draft_extend_v2", "full", "draft_extend_vN.cache_seqlens[N] is N, expected N (too large)")});
  EXPECT_EQ(both[0].group, both[1].group);
  EXPECT_NE(both[0].why.find("follows from"), std::string::npos);
}

TEST(RootCause, TheLengthsChunkedLayersSplitRootTheirVirtualBatches) {
  // A model whose layers are all chunked: the full call's lengths, which the virtual batches split,
  // are named under no layer (backends/fa/fa_check.cc); the chunked layer's wrong query split, key
  // counts and reads follow from them, in the group the same length has on a full layer.
  const auto split =
      root_causes({fp("metadata", "draft_extend_v2", "chunked",
                      "draft_extend_vN.localN: query tokens of kernel row N is N, expected N (too large)"),
                   fp("metadata", "draft_extend_v2", "chunked",
                      "draft_extend_vN.localN.cache_seqlens[N] (batch row N) is N, expected N (too small)"),
                   fp("metadata", "draft_extend_v2", "",
                      "draft_extend_vN.cache_seqlens[N] (batch row N) is N, expected N (too large)"),
                   fp("in-bounds", "draft_extend_v2", "chunked", "unowned-slot")});
  const std::string full =
      root_causes({fp("metadata", "draft_extend_v2", "full",
                      "draft_extend_vN.cache_seqlens[N] (batch row N) is N, expected N (too large)")})[0]
          .group;
  EXPECT_EQ(full, "fa: metadata: cache_seqlens[N] (batch row N) is N, expected N (too large)");
  for (const RootCause& c : split) EXPECT_EQ(c.group, full) << c.why;
  EXPECT_NE(split[1].why.find("follows from metadata metadata/fa/draft_extend_v2/-: draft_extend_vN.cache_seqlens"),
            std::string::npos)
      << split[1].why;
  // A different bug: a shrunk chunk splits right lengths, so only the chunked layer's metadata is
  // wrong. Its own group, neither the wrong length's nor a full layer's short one.
  const auto shrunk =
      root_causes({fp("metadata", "draft_decode", "chunked",
                      "draft_decode.localN.cache_seqlens[N] (batch row N) is N, expected N (too small)"),
                   fp("cache-extent", "draft_decode", "chunked", "missing-oldest")});
  EXPECT_EQ(shrunk[0].group, "fa: metadata: chunked: cache_seqlens[N] (batch row N) is N, expected N (too small)");
  EXPECT_EQ(shrunk[1].group, shrunk[0].group);
  EXPECT_NE(shrunk[0].group, full);
  EXPECT_NE(shrunk[0].group,
            root_causes({fp("metadata", "draft_extend_v2", "full",
                            "draft_extend_vN.cache_seqlens[N] (batch row N) is N, expected N (too small)")})[0]
                .group);
}

TEST(RootCause, DifferentBugsBackendsAndFailuresKeepTheirOwnGroups) {
  // Two page tables of two faults (fa_local_token_table, fa_swa_page_id_translate).
  EXPECT_NE(root_causes({fp("stride-divide", "decode", "chunked", "local_block_table:wrong-slot")})[0].group,
            root_causes({fp("stride-divide", "decode", "sliding_window", "swa_page_table:wrong-slot")})[0].group);
  // A length too large is not a length too small.
  EXPECT_NE(root_causes({fp("metadata", "decode", "-", "kv_indptr[N] - [N] is N, expected N (too large)")})[0].group,
            root_causes({fp("metadata", "decode", "-", "kv_indptr[N] - [N] is N, expected N (too small)")})[0].group);
  const auto r = root_causes({fp("metadata", "decode", "", "kv_indptr[N] - [N] is N, expected N (too small)", "triton"),
                              fp("cache-extent", "decode", "full", "missing-newest", "fa"),
                              fp("crash", "decode", "", "IndexError: list index out of range @ plan", "fa")});
  EXPECT_EQ(r[1].group, "fa: reads: missing");  // not triton's metadata
  EXPECT_EQ(r[2].group, "fa: crash: IndexError: list index out of range @ plan");
  EXPECT_NE(r[2].why.find("a group of its own"), std::string::npos);
}

TEST(RootCause, AVariantsMessageAndAMetadataBufferBoundAreTheirRootsWithoutTheCase) {
  EXPECT_EQ(root_key(fp("metadata", "decode", "", "replay variant: kv_indptr[N] - [N] is N, expected N (too small)")),
            root_key(fp("metadata", "draft_decode", "", "kv_indptr[N] - [N] is N, expected N (too small)")));
  EXPECT_EQ(stage_of(fp("in-bounds", "draft_extend_v2", "", "draft_extend_v2.page_table:read-above")), Stage::table);
  EXPECT_EQ(root_key(fp("in-bounds", "draft_extend_v2", "", "draft_extend_v2.page_table:read-above")),
            "fa: bounds: page_table:read-above");
  EXPECT_EQ(stage_of(fp("in-bounds", "decode", "chunked", "full KV pool:outside")), Stage::reads);
}

}  // namespace
}  // namespace kvfuzz
