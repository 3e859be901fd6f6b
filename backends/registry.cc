#include "backends/registry.h"

namespace kvfuzz {

const std::vector<const Backend*>& all_backends() {
  // One line per backend, in the order `kvfuzz backends` lists them.
  static const std::vector<const Backend*> backends = {};
  return backends;
}

const Backend* find_backend(std::string_view name) {
  for (const Backend* b : all_backends()) {
    if (b->name() == name) return b;
  }
  return nullptr;
}

}  // namespace kvfuzz
