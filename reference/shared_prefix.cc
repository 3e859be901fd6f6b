#include "reference/shared_prefix.h"

namespace kvfuzz {

SharedPrefixes::SharedPrefixes(const std::vector<Op>& history) {
  for (const Op& op : history) {
    if (op.kind == OpKind::share) from_[op.request] = {op.from, op.len};
  }
}

int32_t SharedPrefixes::owner(int32_t request, int32_t column) const {
  // A chain of shares is at most as long as the requests it names (validate.cc forbids cycles:
  // a sharer takes from a request admitted before it).
  for (size_t hops = 0; hops <= from_.size(); ++hops) {
    auto it = from_.find(request);
    // column < 0: a slot the request holds past its tokens (a draft branch's page padding), never shared
    if (it == from_.end() || column < 0 || column >= it->second.len) return request;
    request = it->second.request;
  }
  return request;
}

}  // namespace kvfuzz
