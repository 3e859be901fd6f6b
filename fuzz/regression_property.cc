#include "fuzz/regression_property.h"

#include <cctype>
#include <filesystem>

#include "reference/case_error.h"
#include "reference/io.h"

namespace kvfuzz {

bool is_general_property(const std::string& property) {
  for (const char* p : {"in-bounds", "stride-divide", "cache-extent", "oracle", "metamorphic", "replay", "crash"})
    if (property == p) return true;
  return false;
}

std::string regression_property_path(const std::string& case_path) {
  return std::filesystem::path(case_path).replace_extension(".property").string();
}

std::string read_regression_property(const std::string& case_path) {
  const std::string path = regression_property_path(case_path);
  std::string text = read_input(path, 256);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  if (!is_general_property(text))
    throw InvalidCase(path + ": '" + text +
                      "' is not a general property (in-bounds, stride-divide, cache-extent, "
                      "oracle, metamorphic, replay, crash)");
  return text;
}

void write_regression_property(const std::string& case_path, const std::string& property) {
  write_file_atomic(regression_property_path(case_path), property + "\n");
}

}  // namespace kvfuzz
