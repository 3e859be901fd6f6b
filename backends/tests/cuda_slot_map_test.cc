// The GPU computes the same addresses from kvfuzz metadata as the CPU. Skipped without a GPU.
#include <gtest/gtest.h>

#include "backends/common/paged_view.h"
#include "backends/cuda/slot_map.h"
#include "reference/forward_batch.h"
#include "reference/generate.h"

namespace kvfuzz {
namespace {

TEST(CudaSlotMap, DeviceAddressesMatchTheHost) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const Scenario s = generate(seed, Profile::small);
    const Prepared p = prepare(s);
    const int32_t ps = s.cache.page_size, width = (s.cache.max_context_len + ps - 1) / ps;
    const int32_t rows = s.cache.max_requests + 1;
    std::vector<int32_t> table(static_cast<size_t>(rows) * width);
    for (int32_t r = 0; r < rows; ++r)
      for (int32_t lp = 0; lp < width; ++lp) table[static_cast<size_t>(r) * width + lp] = p.cache.r2t(r, lp * ps) / ps;
    const int32_t keys = width * ps;
    const std::vector<int64_t> device = device_page_table_slots(table, rows, width, keys, ps);
    for (int32_t r = 0; r < rows; ++r)
      for (int32_t k = 0; k < keys; ++k)
        ASSERT_EQ(device[static_cast<size_t>(r) * keys + k], page_table_slot(table.data(), int64_t{r} * width, k, ps))
            << "seed " << seed << " row " << r << " key " << k;
  }
}

}  // namespace
}  // namespace kvfuzz
