// Shared prefixes (`share` ops, case version 3): the cache gives the sharer the same slots and
// keeps their pages while any holder lives; the value source gives both requests the same K/V
// there; bad shares are rejected naming the op; case files carry the op and its version.
#include <gtest/gtest.h>

#include <string>

#include "reference/case_error.h"
#include "reference/forward_batch.h"
#include "reference/scenario_json.h"
#include "reference/shared_prefix.h"
#include "reference/validate.h"
#include "reference/values.h"

namespace kvfuzz {
namespace {

// Request 1 takes request 0's first two pages (page size 4), then grows past them.
Scenario sharing_case() {
  Scenario s;
  s.model = {2, 1, 4, 4, false, 0.5, 0.0, {{LayerKind::full, 0, 0}}, {}};
  s.cache = {4, 16, 0, 4, 32, false};
  s.history = {{OpKind::admit, 0, 0, {}, {}},
               {OpKind::extend, 0, 10, {}, {}},  // pages 1, 2, 3
               {OpKind::admit, 1, 0, {}, {}},
               share_op(1, 0, 8),                // pages 1, 2 shared
               {OpKind::extend, 1, 2, {}, {}}};  // page 4
  s.batch.mode = Mode::decode;
  s.batch.entries = {{0, 0, {}}, {1, 0, {}}};
  return s;
}

std::vector<int32_t> row_slots(const CacheState& c, int32_t request, int32_t n) {
  std::vector<int32_t> out;
  for (int32_t col = 0; col < n; ++col) out.push_back(c.r2t(c.requests.at(request).row, col));
  return out;
}

TEST(SharedPrefix, SharerHoldsTheSameSlotsThenPagesOfItsOwn) {
  const Prepared p = prepare(sharing_case());
  EXPECT_EQ(row_slots(p.cache, 0, 10), (std::vector<int32_t>{4, 5, 6, 7, 8, 9, 10, 11, 12, 13}));
  EXPECT_EQ(row_slots(p.cache, 1, 10), (std::vector<int32_t>{4, 5, 6, 7, 8, 9, 10, 11, 16, 17}));
  EXPECT_EQ(p.batch.seq_lens, (std::vector<int32_t>{11, 11}));
  // A shared slot names one holder; the other holder's column has the same owner.
  const SlotContent& c = p.cache.full_content[5];
  EXPECT_EQ(c.request, 0);
  EXPECT_EQ(c.column, 1);
}

TEST(SharedPrefix, PagesStayWhileAHolderLivesAndContentMovesToIt) {
  Scenario s = sharing_case();
  s.history.push_back({OpKind::free, 0, 0, {}, {}});  // page 3 is free; pages 1, 2 stay with request 1
  s.history.push_back({OpKind::admit, 2, 0, {}, {}});
  s.history.push_back({OpKind::extend, 2, 8, {}, {}});  // LIFO: page 3 first, then page 5
  s.batch.entries = {{1, 0, {}}, {2, 0, {}}};
  const Prepared p = prepare(s);
  EXPECT_EQ(row_slots(p.cache, 2, 8), (std::vector<int32_t>{12, 13, 14, 15, 20, 21, 22, 23}));
  for (int32_t slot = 4; slot < 12; ++slot) {
    EXPECT_EQ(p.cache.full_content[static_cast<size_t>(slot)].request, 1) << slot;
    EXPECT_EQ(p.cache.full_content[static_cast<size_t>(slot)].column, slot - 4) << slot;
  }
  // Once the last holder is gone the shared pages are free again.
  s.history.push_back({OpKind::free, 1, 0, {}, {}});
  s.history.push_back({OpKind::admit, 3, 0, {}, {}});
  s.history.push_back({OpKind::extend, 3, 12, {}, {}});
  s.batch.entries = {{3, 0, {}}};
  const Prepared q = prepare(s);
  EXPECT_EQ(row_slots(q.cache, 3, 12), (std::vector<int32_t>{4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19}));
}

TEST(SharedPrefix, ValuesOfTheSharedColumnsAreTheOwners) {
  const Scenario s = sharing_case();
  const ValueSource src(s);
  EXPECT_EQ(src.owner(1, 7), 0);
  EXPECT_EQ(src.owner(1, 8), 1);
  EXPECT_EQ(src.owner(0, 3), 0);
  EXPECT_EQ(src.owner(1, -1), 1);  // a slot of no column (draft padding) is the holder's own, never shared
  std::vector<float> a(4), b(4);
  for (Tensor t : {Tensor::k, Tensor::v}) {
    src.fill(0, t, 1, 7, 0, a);
    src.fill(0, t, 0, 7, 0, b);
    EXPECT_EQ(a, b);
    src.fill(0, t, 1, 8, 0, a);
    src.fill(0, t, 0, 8, 0, b);
    EXPECT_NE(a, b);
  }
  // Blocks of columns across the shared prefix's end match column by column.
  std::vector<float> block(4 * 6);
  src.fill_columns(0, Tensor::k, 1, 5, 6, 0, block.data(), 4);
  for (int32_t i = 0; i < 6; ++i) {
    src.fill(0, Tensor::k, 1, 5 + i, 0, a);
    EXPECT_EQ(std::vector<float>(block.begin() + 4 * i, block.begin() + 4 * i + 4), a) << i;
  }
}

void expect_invalid(const Scenario& s, const std::string& expected) {
  try {
    validate(s);
    ADD_FAILURE() << "accepted; expected: " << expected;
  } catch (const InvalidCase& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(SharedPrefix, BadSharesAreRejectedNamingTheOp) {
  Scenario s = sharing_case();
  s.history[3] = share_op(1, 0, 6);
  expect_invalid(s, "history[3]: len = 6 must be whole pages");
  s.history[3] = share_op(1, 0, 12);
  expect_invalid(s, "of request 0's 10 tokens");
  s = sharing_case();
  s.history.insert(s.history.begin() + 4, share_op(1, 0, 4));
  expect_invalid(s, "request 1 shares a prefix twice");
  s = sharing_case();
  s.history.push_back({OpKind::free, 0, 0, {}, {}});
  s.history.push_back({OpKind::admit, 0, 0, {}, {}});
  s.history.push_back({OpKind::extend, 0, 1, {}, {}});
  expect_invalid(s, "request 0 takes part in a share and is admitted 2 times");
  s = sharing_case();
  std::swap(s.history[3], s.history[4]);  // extend, then share onto a request with tokens
  expect_invalid(s, "must be just admitted");
  s = sharing_case();
  s.model.layers.push_back({LayerKind::sliding_window, 3, 0});
  s.cache.swa_pages = 8;
  expect_invalid(s, "share needs a cache without an SWA pool");
  s = sharing_case();
  s.history[1].from = 2;
  expect_invalid(s, "history[1].from: only a share op names a request to share from");
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

TEST(SharedPrefix, CaseFilesCarryTheOpAtVersionThree) {
  const Scenario s = sharing_case();
  const std::string text = to_json(s);
  EXPECT_NE(text.find("\"version\": 3"), std::string::npos);
  EXPECT_NE(text.find("{\"op\": \"share\", \"request\": 1, \"len\": 8, \"from\": 0}"), std::string::npos) << text;
  EXPECT_EQ(scenario_from_json(text), s);
  try {
    scenario_from_json(replace(text, "\"version\": 3", "\"version\": 2"));
    ADD_FAILURE() << "a share op read at version 2";
  } catch (const InvalidCase& e) {
    EXPECT_NE(std::string(e.what()).find("history[3].op: share needs case version 3 (is 2)"), std::string::npos)
        << e.what();
  }
  Scenario plain = s;
  plain.history.resize(3);
  EXPECT_NE(to_json(plain).find("\"version\": 2"), std::string::npos);  // older tools still read it
}

}  // namespace
}  // namespace kvfuzz
