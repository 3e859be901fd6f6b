// The error every front end raises for a bad case: a message that names the field and the limit.
//
// Where it sits: thrown by parsing (scenario_json.h) and validation (validate.h), caught once by
// the command line, which prints it and exits 2.
//
//   throw InvalidCase("cache.page_size: 0 is out of range [1, 256]");
#pragma once

#include <stdexcept>
#include <string>

namespace kvfuzz {

class InvalidCase : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kvfuzz
