// Reading inputs with a size limit and writing findings so that none is ever half written.
//
//   std::string text = read_input("case.json", kMaxCaseBytes);   // "-" reads standard input
//   write_file_atomic("out/finding-0001.json", text);
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kvfuzz {

inline constexpr size_t kMaxCaseBytes = size_t{64} << 20;

// Throws InvalidCase naming the path if it cannot be read or is larger than `limit`.
std::string read_input(const std::string& path, size_t limit);

// Writes to a temporary file in the same folder, flushes it to disk, then renames it over
// `path`: a reader sees the old file or the whole new one. Throws std::runtime_error.
void write_file_atomic(const std::string& path, std::string_view text);

}  // namespace kvfuzz
