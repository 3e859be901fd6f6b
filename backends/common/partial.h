// Per-(token, head) attention results of one layer: a kernel's output, or one part of a cascade.
//
// Where it sits: executors run kernel rows into Partials, merge the parts of a cascade or a split
// by log-sum-exp, and copy the final one into RunOutput.
//
//   Partial main(tokens, heads, vd), expand(tokens, heads, vd);
//   main.merge(expand);          // main = merge_state(main, expand)
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backends/common/attention_math.h"

namespace kvfuzz {

class Partial {
 public:
  Partial(int64_t tokens, int32_t heads, int32_t v_head_dim)
      : tokens_(tokens),
        heads_(heads),
        vd_(v_head_dim),
        out_(static_cast<size_t>(tokens * heads * v_head_dim), 0.0f),
        lse_(static_cast<size_t>(tokens * heads), -std::numeric_limits<float>::infinity()) {}

  float* out(int64_t token, int32_t head) { return out_.data() + (static_cast<size_t>(token) * heads_ + head) * vd_; }
  const float* out(int64_t token, int32_t head) const {
    return out_.data() + (static_cast<size_t>(token) * heads_ + head) * vd_;
  }
  float& lse(int64_t token, int32_t head) { return lse_[static_cast<size_t>(token) * heads_ + head]; }
  float lse(int64_t token, int32_t head) const { return lse_[static_cast<size_t>(token) * heads_ + head]; }

  // this = merge_state(this, other), token by token.
  void merge(const Partial& other) {
    for (int64_t t = 0; t < tokens_; ++t) {
      for (int32_t h = 0; h < heads_; ++h) merge_states(out(t, h), lse(t, h), other.out(t, h), other.lse(t, h), vd_, out(t, h), &lse(t, h));
    }
  }

  // Token t's heads take the sinks in (fold_sink): sinks [heads], one logit per q head.
  void fold_sinks(int64_t token, const std::vector<double>& sinks) {
    for (int32_t h = 0; h < heads_; ++h) fold_sink(out(token, h), &lse(token, h), static_cast<float>(sinks[h]), vd_);
  }

  int64_t tokens() const { return tokens_; }
  int32_t heads() const { return heads_; }
  int32_t v_head_dim() const { return vd_; }

 private:
  int64_t tokens_;
  int32_t heads_, vd_;
  std::vector<float> out_;  // [tokens][heads][v_head_dim]
  std::vector<float> lse_;  // [tokens][heads], natural log, -inf: no key
};

}  // namespace kvfuzz
