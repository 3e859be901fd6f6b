// The GPU computes the addresses kvfuzz metadata means: hand-computed slots of a small page table
// (on the host always, on the device when there is one), and on generated caches every committed
// key of every live request resolves, on the device, to its req_to_token slot — the stride/divide
// invariant checked against the cache simulator, not against the function itself.
#include <gtest/gtest.h>

#include "backends/common/paged_view.h"
#include "backends/cuda/slot_map.h"
#include "reference/forward_batch.h"
#include "reference/generate.h"

namespace kvfuzz {
namespace {

// Two rows of width 3, page size 4. Row 0 holds pages {3, 1, 7}: keys 0..3 are slots 12..15,
// keys 4..7 slots 4..7, keys 8..11 slots 28..31. Row 1 holds {0, 2, 0}: keys 0..3 and 8..11 are
// the dummy page's slots 0..3, keys 4..7 slots 8..11.
const std::vector<int32_t> kTable = {3, 1, 7, 0, 2, 0};
const std::vector<int64_t> kSlots = {12, 13, 14, 15, 4, 5, 6,  7,  28, 29, 30, 31,  // row 0
                                     0,  1,  2,  3,  8, 9, 10, 11, 0,  1,  2,  3};  // row 1

TEST(SlotMap, HostPageTableSlotsAreTheHandComputedOnes) {
  for (int32_t r = 0; r < 2; ++r)
    for (int32_t k = 0; k < 12; ++k)
      EXPECT_EQ(page_table_slot(kTable.data(), int64_t{r} * 3, k, 4), kSlots[static_cast<size_t>(r * 12 + k)])
          << "row " << r << " key " << k;
}

TEST(CudaSlotMap, DeviceSlotsAreTheHandComputedOnes) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  EXPECT_EQ(device_page_table_slots(kTable, 2, 3, 12, 4), kSlots);
}

TEST(CudaSlotMap, DeviceResolvesEveryCommittedKeyToItsReqToTokenSlot) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  int64_t checked = 0;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const Scenario s = generate(seed, Profile::small);
    const Prepared p = prepare(s);
    const int32_t ps = s.cache.page_size, width = (s.cache.max_context_len + ps - 1) / ps;
    const int32_t rows = s.cache.max_requests + 1;
    std::vector<int32_t> table(static_cast<size_t>(rows) * width);  // stride, then divide
    for (int32_t r = 0; r < rows; ++r)
      for (int32_t lp = 0; lp * ps < s.cache.max_context_len; ++lp)
        table[static_cast<size_t>(r) * width + lp] = p.cache.r2t(r, lp * ps) / ps;
    const int32_t keys = width * ps;
    const std::vector<int64_t> device = device_page_table_slots(table, rows, width, keys, ps);
    for (const auto& [id, req] : p.cache.requests) {
      for (int32_t k = 0; k < req.seq_len; ++k, ++checked)
        ASSERT_EQ(device[static_cast<size_t>(req.row) * keys + k], p.cache.r2t(req.row, k))
            << "seed " << seed << " request " << id << " key " << k;
    }
  }
  EXPECT_GT(checked, 1000);
}

}  // namespace
}  // namespace kvfuzz
