#include "backends/registry.h"

#include "backends/fa/fa_backend.h"
#include "backends/flashinfer/flashinfer_backend.h"
#include "backends/mla/mla_backend.h"
#include "backends/triton/triton_backend.h"

namespace kvfuzz {

const std::vector<const Backend*>& all_backends() {
  // One line per backend, in the order `kvfuzz backends` lists them.
  static const std::vector<const Backend*> backends = {
      &fa_backend(),
      &flashinfer_backend(),
      &flashinfer_paged_backend(),
      &triton_backend(),
      &mla_backend(),
  };
  return backends;
}

const Backend* find_backend(std::string_view name) {
  for (const Backend* b : all_backends()) {
    if (b->name() == name) return b;
  }
  return nullptr;
}

}  // namespace kvfuzz
