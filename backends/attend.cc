#include "backends/attend.h"

#include <algorithm>

namespace kvfuzz {

LayerContext::LayerContext(const RunInput& in, int32_t layer, RunOutput& out)
    : in_(in),
      layer_(layer),
      out_(out),
      pool_(in.pools.layer(layer)),
      sm_scale_(static_cast<float>(in.scenario.model.sm_scale)),
      softcap_(static_cast<float>(in.scenario.model.softcap)) {}

Partial LayerContext::make_partial() const {
  return Partial(in_.batch.num_tokens(), in_.scenario.model.q_heads, in_.scenario.model.v_head_dim);
}

bool LayerContext::check(const Read& r, const Where& where) const {
  try {
    if (r.source == ReadSource::batch) {
      if (r.index < 0 || r.index >= in_.batch.num_tokens())
        throw Violation("batch k/v", "token " + std::to_string(r.index) + " outside the batch's " +
                                         std::to_string(in_.batch.num_tokens()) + " tokens", where);
      return true;
    }
    if (r.source != pool_source())
      throw Violation(std::string(r.source == ReadSource::swa ? "SWA" : "full") + " KV pool",
                      "layer " + std::to_string(layer_) + " keeps its K/V in the " + to_string(pool_.kind) +
                          " pool but reads this one", where);
    pool_.check(r.index, where);
    return true;
  } catch (const Violation& v) {
    if (in_.lenient == nullptr) throw;
    in_.lenient->push_back(v.what());
    return false;
  }
}

const float* LayerContext::k(const Read& r, int32_t kv_head, const Where& where) const {
  if (r.source == ReadSource::batch) return in_.tensors.k(layer_, r.index, kv_head);
  return pool_.k(r.index, kv_head, where);
}

const float* LayerContext::v(const Read& r, int32_t kv_head, const Where& where) const {
  if (r.source == ReadSource::batch) return in_.tensors.v(layer_, r.index, kv_head);
  return pool_.v(r.index, kv_head, where);
}

void LayerContext::write_output(const Partial& p) {
  for (int64_t t = 0; t < p.tokens(); ++t) {
    for (int32_t h = 0; h < p.heads(); ++h) {
      std::copy(p.out(t, h), p.out(t, h) + p.v_head_dim(), out_.out_at(layer_, t, h));
      out_.lse_at(layer_, t, h) = p.lse(t, h);
    }
  }
}

}  // namespace kvfuzz
