// A backend that failed as a program rather than broke a metadata rule: it crashed, hung, threw,
// or answered something the contract does not allow.
//
// Where it sits: thrown by external backends (backends/external/) from plan() and run(); the
// property harness (properties/check.cc) turns it into a finding of its property, so a campaign
// saves the case and goes on. Violation (violation.h) stays the type of rule breaks.
//
//   throw BackendFailure("hang", "numpy_pt: no answer within 60 s");
#pragma once

#include <stdexcept>
#include <string>

namespace kvfuzz {

class BackendFailure : public std::runtime_error {
 public:
  // property: "crash" (died, threw, CUDA error), "hang" (timeout), "contract" (malformed answer),
  // or "in-bounds" (the adapter saw a guard zone or an input overwritten).
  BackendFailure(std::string property, const std::string& message)
      : std::runtime_error(message), property_(std::move(property)) {}
  const std::string& property() const { return property_; }

 private:
  std::string property_;
};

// An external backend answered that this case needs what it does not do (PROTOCOL.md: a
// combination its declaration cannot express): the case counts as unsupported, not a finding.
class BackendUnsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kvfuzz
