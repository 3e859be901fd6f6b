#include "properties/read_diff.h"

#include <algorithm>
#include <set>

namespace kvfuzz {
namespace {

// got == expected + k for one k != 0 (both without repeats, the same size): the rule's set moved.
int64_t shift_of(const std::vector<int64_t>& expected, const std::vector<int64_t>& got) {
  if (expected.empty() || got.size() != expected.size()) return 0;
  const int64_t k = got[0] - expected[0];
  for (size_t i = 1; i < got.size(); ++i)
    if (got[i] - expected[i] != k) return 0;
  return k;
}

}  // namespace

std::string read_diff_mechanism(const std::vector<int64_t>& expected, const std::vector<int64_t>& got,
                                const std::vector<std::string>& foreign_kinds) {
  if (!foreign_kinds.empty()) {
    // Reads that went elsewhere: where each one landed (and so which own keys it left out or hit
    // twice) depends on the allocator's history, not on the mechanism. The worst kind names it.
    static const char* const kSeverity[] = {
        "outside-pool",  "other-row",      "other-request", "other-request-or-unowned",
        "other-head",    "unwritten-slot", "unowned-slot",  "padding-slot",
        "beyond-length", "read-many"};
    for (const char* kind : kSeverity)
      if (std::find(foreign_kinds.begin(), foreign_kinds.end(), kind) != foreign_kinds.end()) return kind;
    return foreign_kinds.front();
  }
  std::vector<std::string> tags;
  std::vector<int64_t> unique_got = got;
  unique_got.erase(std::unique(unique_got.begin(), unique_got.end()), unique_got.end());
  const bool twice = unique_got.size() != got.size();
  const int64_t shift = shift_of(expected, unique_got);
  if (shift != 0) {
    tags.push_back(shift < 0 ? "shifted-older" : "shifted-newer");
  } else {
    std::vector<int64_t> hit;  // expected keys that were read
    std::set_intersection(expected.begin(), expected.end(), unique_got.begin(), unique_got.end(), std::back_inserter(hit));
    std::set<std::string> missing, extra;
    for (int64_t c : expected) {
      if (std::binary_search(hit.begin(), hit.end(), c)) continue;
      if (hit.empty()) missing.insert("missing-all");
      else if (c < hit.front()) missing.insert("missing-oldest");
      else if (c > hit.back()) missing.insert("missing-newest");
      else missing.insert("missing-interior");
    }
    for (int64_t c : unique_got) {
      if (std::binary_search(expected.begin(), expected.end(), c)) continue;
      if (expected.empty() || c > expected.back()) extra.insert("extra-after");
      else if (c < expected.front()) extra.insert("extra-before");
      else extra.insert("extra-interior");
    }
    tags.insert(tags.end(), missing.begin(), missing.end());
    tags.insert(tags.end(), extra.begin(), extra.end());
  }
  if (twice) tags.push_back("read-twice");
  std::string out;
  for (const std::string& t : tags) out += (out.empty() ? "" : "+") + t;
  return out.empty() ? "same-set" : out;
}

}  // namespace kvfuzz
