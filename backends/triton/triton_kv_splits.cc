// The Triton decode split count (see triton_kv_splits.h).
#include "backends/triton/triton_kv_splits.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace kvfuzz {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::vector<int32_t> triton_kv_splits(std::span<const int32_t> lens, int32_t group, const SplitConfig& c) {
  const int32_t max_splits = std::max(1, c.max_kv_splits);
  const auto rows_per_seq = static_cast<size_t>(std::max(1, group));
  std::vector<int32_t> out(lens.size() * rows_per_seq, max_splits);
  if (c.device_sms <= 0 || lens.empty()) return out;

  auto len_of = [](int32_t len) { return int64_t{std::max(1, len)}; };
  int64_t lo = len_of(lens[0]), hi = lo;
  for (int32_t len : lens) {
    lo = std::min(lo, len_of(len));
    hi = std::max(hi, len_of(len));
  }
  if (hi * 8 < lo * 10) lo = hi;
  const int64_t splits1 = std::min<int64_t>(ceil_div(hi, lo), max_splits);
  const int64_t chunk1 = ceil_div(hi, splits1);

  const auto cores = static_cast<int64_t>(c.device_sms * std::max(std::log2(static_cast<double>(hi) / 64.0), 1.0));
  const auto seqs = static_cast<int64_t>(lens.size() * rows_per_seq);
  const int32_t kv_group = c.q_heads / std::max(1, c.kv_heads);
  const int64_t grid = kv_group == 1 ? seqs * c.q_heads : seqs * ceil_div(c.q_heads, std::min(16, kv_group));
  const int64_t splits2 = std::clamp<int64_t>(ceil_div(cores, grid), 1, max_splits);
  const int64_t chunk2 = ceil_div(hi, splits2);

  for (size_t i = 0; i < lens.size(); ++i) {
    const int64_t len = len_of(lens[i]);
    const auto splits = static_cast<int32_t>(std::max(ceil_div(len, chunk1), ceil_div(len, chunk2)));
    std::fill_n(out.begin() + static_cast<std::ptrdiff_t>(i * rows_per_seq), rows_per_seq, splits);
  }
  return out;
}

}  // namespace kvfuzz
