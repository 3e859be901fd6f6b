// A broken rule found while planning or executing: an index outside its buffer, a read in the
// wrong pool or of another request's slot, a guard zone overwritten.
//
// Where it sits: thrown by the checked accessors (checked_buffer.h, kv_pools.h) and by the K/V
// writer; caught once per backend run by the property harness, which reports it as an in-bounds
// finding. Executors on the CPU are single-threaded per case, so throwing is safe.
//
//   throw Violation("kv_indices", "read at 1040, capacity 1024", where);
#pragma once

#include <stdexcept>
#include <string>

namespace kvfuzz {

// Where the executor was when it broke a rule, for the report: "layer 1, row 3 (request 7), token 12".
struct Where {
  int32_t layer = -1;
  int32_t row = -1;
  int64_t token = -1;
  std::string str() const {
    std::string s;
    if (layer >= 0) s += "layer " + std::to_string(layer);
    if (row >= 0) s += (s.empty() ? "" : ", ") + std::string("row ") + std::to_string(row);
    if (token >= 0) s += (s.empty() ? "" : ", ") + std::string("token ") + std::to_string(token);
    return s;
  }
};

class Violation : public std::runtime_error {
 public:
  Violation(std::string buffer, std::string what, const Where& where = {})
      : std::runtime_error(buffer + ": " + what + (where.str().empty() ? "" : " (" + where.str() + ")")),
        buffer_(std::move(buffer)),
        where_(where) {}
  const std::string& buffer() const { return buffer_; }
  const Where& where() const { return where_; }

 private:
  std::string buffer_;
  Where where_;
};

}  // namespace kvfuzz
