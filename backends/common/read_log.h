// What each query actually read: the executors' side of the extent properties.
//
// Where it sits: executors record every key that contributes to a query (after masking), once per
// (layer, query token), whatever the number of heads; the properties turn each record into the
// logical (request, column) it holds and compare with the oracle's visible set. A key comes from
// a pool slot, or from the batch's own new-token tensors (Triton and FlashInfer extend read the
// new tokens' K/V from the k/v inputs, not from the cache).
//
//   log.record(layer, token, {ReadSource::swa, slot});
#pragma once

#include <cstdint>
#include <vector>

namespace kvfuzz {

enum class ReadSource : uint8_t { full, swa, batch };  // batch: index is a token of this batch

struct Read {
  ReadSource source = ReadSource::full;
  int64_t index = 0;  // slot, or batch token
  bool operator==(const Read&) const = default;
};

class ReadLog {
 public:
  ReadLog() = default;
  ReadLog(int32_t layers, int64_t num_tokens)
      : num_tokens_(num_tokens), reads_(static_cast<size_t>(layers * num_tokens)) {}

  void record(int32_t layer, int64_t token, Read r) { reads_[static_cast<size_t>(layer * num_tokens_ + token)].push_back(r); }
  const std::vector<Read>& reads(int32_t layer, int64_t token) const {
    return reads_[static_cast<size_t>(layer * num_tokens_ + token)];
  }

 private:
  int64_t num_tokens_ = 0;
  std::vector<std::vector<Read>> reads_;  // [layers][num_tokens]
};

}  // namespace kvfuzz
