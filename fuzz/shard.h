// Which of a campaign's cases a shard runs (kvfuzz run --shard I/N; docs/cluster.md).
//
// Case i of a campaign draws profile i mod P (its P profiles, run_case), so shards that took every
// N-th case would each draw only some profiles wherever N and P share a factor (two profiles, two
// shards: shard 0 only the first), and a time-bounded shard's mix would not be the campaign's.
// Shards take blocks of P consecutive cases instead, block b to shard b mod N: every shard draws
// every profile in turn, the same cases byte for byte as one process would, and the N shards
// together run each case once. `block` 1 is the rule of shards written before (i mod N == I); a
// shard's campaign.json records its block (settings "shard_block"), so kvfuzz merge checks a
// folder by the rule it ran.
//
//   const ShardRule rule{1, 3, 2};   // shard 1 of 3, two profiles: cases 2, 3, 8, 9, 14, 15, ...
//   rule.case_at(k);                 // its k-th case
//   rule.owns(i);                    // case i is its
#pragma once

#include <cstdint>

namespace kvfuzz {

struct ShardRule {
  int64_t index = 0, count = 1, block = 1;

  // This shard's k-th case (k = 0, 1, ...): increasing in k.
  int64_t case_at(int64_t k) const { return ((k / block) * count + index) * block + k % block; }
  bool owns(int64_t i) const { return i >= 0 && (i / block) % count == index; }
  // This shard's first k whose case is at or after campaign case `i` (i >= 0).
  int64_t first_at_or_after(int64_t i) const {
    const int64_t b = i / block;
    if (b % count == index) return (b / count) * block + i % block;  // inside one of its blocks
    const int64_t j = b < index ? 0 : (b - index + count - 1) / count;  // its first block after b
    return j * block;
  }
};

}  // namespace kvfuzz
