// A bug in kvfuzz's own checking code, not in the backend under test.
//
// Where it sits: thrown by harness code that runs inside a backend run (the MetadataChecker
// helpers, when a check asks for an input entry that does not exist); run_backend lets it pass,
// campaigns count it apart from findings, and the command line exits 3 on it. Never a finding:
// filing it under a backend would blame the backend for kvfuzz's mistake.
//
//   throw HarnessError("metadata check asked for req_to_token[9][0]: ...");
#pragma once

#include <stdexcept>
#include <string>

namespace kvfuzz {

class HarnessError : public std::logic_error {
 public:
  explicit HarnessError(const std::string& what) : std::logic_error("harness error: " + what) {}
};

}  // namespace kvfuzz
