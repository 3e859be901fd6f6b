// An index outside one of the inputs the cache hands a backend (req_to_token today), named.
//
// Where it sits: thrown by the checked reads of reference/cache.h (CacheState::r2t). A backend
// that reads its input past the end is an in-bounds finding (properties/check.cc run_backend
// reports it under the input's name); the same throw from harness code is a harness error
// (backends/common/harness_error.h). Derives from std::out_of_range, so older catch sites still
// see it.
//
//   throw InputOutOfRange("req_to_token", "req_to_token[3][40] is outside its 4 x 32 entries");
#pragma once

#include <stdexcept>
#include <string>

namespace kvfuzz {

class InputOutOfRange : public std::out_of_range {
 public:
  InputOutOfRange(std::string input, const std::string& what) : std::out_of_range(what), input_(std::move(input)) {}
  const std::string& input() const { return input_; }  // "req_to_token"

 private:
  std::string input_;
};

}  // namespace kvfuzz
