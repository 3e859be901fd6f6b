// The explicit list of backends. Adding one is a folder and a line in registry.cc.
//
//   for (const Backend* b : all_backends()) std::cout << b->name();
//   const Backend* fa = find_backend("fa");   // nullptr if unknown
#pragma once

#include <string_view>
#include <vector>

#include "backends/backend.h"

namespace kvfuzz {

const std::vector<const Backend*>& all_backends();
const Backend* find_backend(std::string_view name);

}  // namespace kvfuzz
