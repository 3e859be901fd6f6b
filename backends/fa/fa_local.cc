// See fa_local.h.
#include "backends/fa/fa_local.h"

#include <algorithm>
#include <vector>

#include "backends/fa/fa_tables.h"

namespace kvfuzz::fa {
namespace {

struct VirtualBatch {
  int32_t base_row = 0, q_len = 0, k_len = 0, k_start = 0;
};

// Floor modulo, as numpy's % (p may be negative only on padded rows, handled before).
int32_t mod(int32_t a, int32_t m) { return ((a % m) + m) % m; }

std::vector<VirtualBatch> split(const FaCall& base, int32_t chunk) {
  std::vector<VirtualBatch> out;
  for (int32_t b = 0; b < base.rows; ++b) {
    const int32_t q = base.q_len(b), s = base.cache_seqlens[b];
    if (q > s || s == 0) {
      // Only padded CUDA-graph rows (seq_len fill 1 under several queries) get here; production
      // never runs local attention in those modes. One batch over the row's keys, in page 0.
      out.push_back({b, q, s, 0});
      continue;
    }
    const int32_t p = s - q;
    const int32_t f = std::min(chunk - mod(p, chunk), q);
    const int32_t n = 1 + ceil_div(q - f, chunk);
    const int32_t t = (s - 1) % chunk + 1;
    for (int32_t j = 0; j < n; ++j) {
      const int32_t rj = n - 1 - j;
      const int32_t q_len = j == 0 ? f : std::min(q - f - chunk * (j - 1), chunk);
      out.push_back({b, q_len, j == n - 1 ? t : chunk, s - (rj * chunk + t)});
    }
  }
  return out;
}

}  // namespace

FaCall make_local_attention(const LocalInput& in, int32_t chunk, const LocalOptions& opt) {
  const int32_t ps = in.page_size;
  int32_t c = chunk;
  if (opt.shrink_chunk) {
    // sglang: attn_chunk_size = min(C, max(seq_lens)), floored to the page size, at least ps.
    int32_t max_k = 0;
    for (int32_t b = 0; b < in.base.rows; ++b) max_k = std::max(max_k, in.base.cache_seqlens[b]);
    c = std::max(ps, std::min(chunk, max_k) / ps * ps);
  }
  const std::vector<VirtualBatch> vbs = split(in.base, c);
  const int32_t pages = c / ps;  // pages_per_local_batch; c % ps == 0 (validated)
  // Capture capacity: max_virtual_batches = rows * ceil(context / C), block table [.., C / ps].
  const int64_t capacity =
      opt.graph ? in.base_row_capacity * ceil_div(opt.max_context_len, chunk) : static_cast<int64_t>(vbs.size());
  const int32_t width = opt.graph ? ceil_div(chunk, ps) : pages;
  FaCall call = make_call(opt.name, opt.name + ".local_block_table", capacity, width, ps, /*causal=*/true);
  int32_t q_begin = 0;
  for (size_t v = 0; v < vbs.size(); ++v) {
    const VirtualBatch& vb = vbs[v];
    const auto row = static_cast<int32_t>(v);
    set_row(call, row, q_begin, vb.q_len, vb.k_len);
    q_begin += vb.q_len;
    if (in.block_width == 0) continue;
    for (int32_t i = 0; i < pages; ++i) {
      const int32_t column = std::min(vb.k_start / ps + i, in.block_width - 1);
      call.page_table.set(int64_t{row} * width + i, in.block_table[int64_t{vb.base_row} * in.block_width + column]);
    }
  }
  finish_call(call, static_cast<int32_t>(vbs.size()));
  return call;
}

}  // namespace kvfuzz::fa
