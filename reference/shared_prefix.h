// Shared prefixes: which request's tokens a request's first columns are (prefix caching).
//
// Where it sits: read from the history's `share` ops; the value source resolves every K/V column
// through it, so a request that took another's prefix pages holds that request's K/V there, and the
// oracle, the pools and the read attribution agree on it without a table. A request shares at
// most once and every request of a share is admitted once (validate.cc), so the map is a property
// of the history, not of a moment in it.
//
//   SharedPrefixes shared(scenario.history);
//   shared.owner(2, 17);  // the request whose (request, column) K/V is request 2's column 17
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "reference/scenario.h"

namespace kvfuzz {

// A share op: `request` (just admitted) takes request `from`'s first `len` tokens' pages.
//   h.emit(share_op(2, 0, 32));
inline Op share_op(int32_t request, int32_t from, int32_t len) {
  Op op{OpKind::share, request, len, {}, {}};
  op.from = from;
  return op;
}

class SharedPrefixes {
 public:
  SharedPrefixes() = default;
  explicit SharedPrefixes(const std::vector<Op>& history);

  // The request that wrote the K/V of (request, column): follows share ops while the column lies
  // in the shared prefix. A request that shares nothing owns all its columns, and every request its
  // slots of no column (-1: held past its tokens, as a draft branch's page padding).
  int32_t owner(int32_t request, int32_t column) const;

  bool empty() const { return from_.empty(); }

 private:
  struct Source {
    int32_t request = 0;
    int32_t len = 0;
  };
  std::map<int32_t, Source> from_;  // sharer -> (source request, shared columns)
};

}  // namespace kvfuzz
