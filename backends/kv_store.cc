#include "backends/kv_store.h"

namespace kvfuzz {

std::vector<int64_t> step_cache_locs(const ForwardBatch& fb) {
  if (fb.mode != Mode::draft_decode) return fb.out_cache_loc;
  std::vector<int64_t> locs;
  for (int32_t i = 0; i < fb.padded_bs; ++i) {
    for (int32_t t = 0; t < fb.topk; ++t)
      locs.push_back(fb.out_cache_loc[static_cast<size_t>((i * fb.topk + t) * fb.draft_steps + fb.draft_step)]);
  }
  return locs;
}

void store_new_kv(int32_t layer, const std::vector<int64_t>& locs, const RunInput& in) {
  const ForwardBatch& fb = in.batch;
  if (fb.mode == Mode::draft_q_only) return;  // its layers share the target's KV: no write
  KvPool& pool = in.pools.layer(layer);
  int64_t token = 0;
  for (int32_t row = 0; row < fb.padded_bs; ++row) {
    for (int32_t j = 0; j < fb.extend_lens[static_cast<size_t>(row)]; ++j, ++token) {
      const Where where{layer, row, token};
      int64_t slot = locs[static_cast<size_t>(token)];
      if (pool.kind == PoolKind::swa) {
        if (slot < 0 || slot >= static_cast<int64_t>(in.cache.full_to_swa.size()))
          throw Violation("full_to_swa", "index " + std::to_string(slot) + " outside its " +
                                             std::to_string(in.cache.full_to_swa.size()) + " entries", where);
        slot = in.cache.full_to_swa[static_cast<size_t>(slot)];
      }
      pool.check(slot, where);
      const int32_t column = fb.token_columns[static_cast<size_t>(token)];
      if (row >= fb.bs) {
        if (slot >= fb.page_size)
          throw Violation("out_cache_loc", "a padded row writes slot " + std::to_string(slot) + " outside the dummy page 0", where);
      } else {
        const SlotContent& c = pool.content(slot);
        const int32_t request = fb.request_ids[static_cast<size_t>(row)];
        if (c.request != request || c.column != column)
          throw Violation("out_cache_loc",
                          "token (request " + std::to_string(request) + ", column " + std::to_string(column) +
                              ") is written to " + to_string(pool.kind) + " slot " + std::to_string(slot) +
                              ", which holds " + (c.live() ? "request " + std::to_string(c.request) + ", column " + std::to_string(c.column) : std::string("no live token")),
                          where);
      }
      for (int32_t h = 0; h < pool.kv_heads; ++h)
        pool.write(slot, h, in.tensors.k(layer, token, h), in.tensors.v(layer, token, h), where);
    }
  }
}

}  // namespace kvfuzz
