// Row keys of the Triton CSRs (see triton_rows.h): one function per mode family.
#include "backends/triton/triton_rows.h"

#include <algorithm>

#include "reference/draft_layout.h"

namespace kvfuzz {

bool uses_decode_kernel(Mode mode) { return mode == Mode::decode || mode == Mode::idle || mode == Mode::draft_decode; }

int32_t kernel_rows(const ForwardBatch& fb) {
  return fb.mode == Mode::draft_decode ? fb.padded_bs * fb.topk : fb.padded_bs;
}

int32_t real_kernel_rows(const ForwardBatch& fb) { return fb.mode == Mode::draft_decode ? fb.bs * fb.topk : fb.bs; }

int32_t request_of_row(const ForwardBatch& fb, int32_t row) {
  return fb.mode == Mode::draft_decode ? row / fb.topk : row;
}

int32_t lowest_position(LayerKind kind, int32_t window_or_chunk, int32_t position) {
  switch (kind) {
    case LayerKind::full:
      return 0;
    case LayerKind::sliding_window:
      return std::max(0, position - window_or_chunk);
    case LayerKind::chunked:
      return position / window_or_chunk * window_or_chunk;
  }
  return 0;
}

int32_t extend_prefix_len(const ForwardBatch& fb, int32_t i, const RowRule& rule) {
  const auto at = static_cast<size_t>(i);
  switch (fb.mode) {
    case Mode::target_verify:
      return fb.seq_lens[at];  // the verified prefix; drafts via k_extend
    case Mode::draft_extend_v2:
      // seq_lens already count the new tokens; the graph replay clamps at 0 (padded rows).
      return rule.v2_prefix_from_seq_lens ? fb.seq_lens[at] : std::max(0, fb.seq_lens[at] - fb.extend_lens[at]);
    default:
      return fb.prefix_lens[at];  // extend_prefix_lens
  }
}

TritonRowKeys row_keys(const ForwardBatch& fb, LayerKind kind, int32_t window_or_chunk, int32_t row,
                       const RowRule& rule) {
  TritonRowKeys keys;
  keys.request_row = request_of_row(fb, row);
  const auto at = static_cast<size_t>(keys.request_row);
  if (fb.mode == Mode::draft_decode) {
    const int32_t seq_len = fb.seq_lens[at];
    const int32_t position = seq_len + fb.draft_step;  // every branch's query sits at step j
    const int32_t lo = lowest_position(kind, window_or_chunk, position);
    keys.first = std::min(lo, seq_len);
    keys.prefix_end = seq_len;
    keys.branch = row % fb.topk;
    keys.step_begin = std::max(0, lo - seq_len);
    keys.step_end = fb.draft_step + 1;
    return keys;
  }
  if (uses_decode_kernel(fb.mode)) {
    const int32_t seq_len = fb.seq_lens[at];
    int32_t lo = lowest_position(kind, window_or_chunk, seq_len - 1);
    // update_sliding_window_buffer: window_len = min(seq_len, W) drops the oldest in-window key.
    if (kind == LayerKind::sliding_window && rule.decode_window_short && fb.mode == Mode::decode)
      lo = seq_len - std::min(seq_len, window_or_chunk);
    keys.first = lo;
    keys.prefix_end = seq_len;
    return keys;
  }
  const int32_t prefix = extend_prefix_len(fb, keys.request_row, rule);
  // The first new token (a tree's root) sits at position `prefix` and sees the most of the prefix.
  keys.first = std::min(prefix, lowest_position(kind, window_or_chunk, prefix));
  keys.prefix_end = prefix;
  return keys;
}

int32_t TritonRowKeys::column(int32_t k, const ForwardBatch& fb) const {
  if (k < prefix_len()) return first + k;
  const int32_t seq_len = fb.seq_lens[static_cast<size_t>(request_row)];
  return draft_layout(seq_len, fb.page_size, fb.topk, fb.draft_steps).column(branch, step_begin + k - prefix_len());
}

}  // namespace kvfuzz
