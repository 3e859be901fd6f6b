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
    if (it == from_.end() || column >= it->second.len) return request;
    request = it->second.request;
  }
  return request;
}

}  // namespace kvfuzz
