// How a query's read set differs from the set its layer's rule makes visible, in words that do not
// depend on the case's sizes: the mechanism part of a read-set finding's fingerprint.
//
// Where it sits: called by the extent check (check.cc) for every query whose reads are wrong;
// fingerprint.h puts the result next to the layer's kind, so "missing-oldest" on a
// sliding-window layer reads "the oldest in-window key is missing" and "extra-before" on a chunked
// layer "keys across the chunk boundary were read".
//
//   read_diff_mechanism({3, 4, 5}, {4, 5}, {});          // "missing-oldest"
//   read_diff_mechanism({3, 4, 5}, {0, 1, 2, 3, 4, 5}, {}); // "extra-before"
//   read_diff_mechanism({3, 4, 5}, {2, 3, 4}, {});        // "shifted-older"
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvfuzz {

// With foreign reads, the worst of their kinds alone (given by the caller: outside-pool,
// other-row, other-request, other-head (the row's own keys of another kv head: a GQA head-mapping
// error), unwritten-slot, unowned-slot, ...): where a misaddressed read lands,
// and so which own keys it leaves out, follows from the allocator's history, not the mechanism.
// Otherwise tags joined by '+', in a fixed order: "shifted-older" / "shifted-newer" (the visible
// set moved by a constant) or the missing-* and extra-* tags, then "read-twice". Missing keys are
// "oldest" (before every expected key that was read), "newest" (after every one), "interior"
// (between), or "all"; extra keys are "before" the visible set, "after" the query's own key
// (future keys) or "interior" (a hole of the rule, e.g. a non-ancestor draft).
// `expected`: ascending, unique; `got`: ascending, repeats kept.
std::string read_diff_mechanism(const std::vector<int64_t>& expected, const std::vector<int64_t>& got,
                                const std::vector<std::string>& foreign_kinds);

}  // namespace kvfuzz
