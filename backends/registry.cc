#include "backends/registry.h"

#include "backends/external/pair_backend.h"
#include "backends/fa/fa_backend.h"
#include "backends/flashinfer/flashinfer_backend.h"
#include "backends/mla/mla_backend.h"
#include "backends/triton/triton_backend.h"

namespace kvfuzz {
namespace {

struct Registered {
  std::vector<const Backend*> all = builtin_backends();
  std::vector<std::unique_ptr<Backend>> owned;
  std::vector<std::shared_ptr<Adapter>> adapters;
};

Registered& registered() {
  static Registered r;
  return r;
}

}  // namespace

const std::vector<const Backend*>& builtin_backends() {
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

const std::vector<const Backend*>& all_backends() { return registered().all; }

const Backend* find_backend(std::string_view name) {
  for (const Backend* b : all_backends()) {
    if (b->name() == name) return b;
  }
  return nullptr;
}

const std::vector<std::shared_ptr<Adapter>>& registered_adapters() { return registered().adapters; }

std::vector<const Backend*> register_adapter(const std::string& command, double timeout_seconds) {
  return register_adapter(command, timeout_seconds, AdapterLayout{});
}

std::vector<const Backend*> register_adapter(const std::string& command, double timeout_seconds,
                                             const AdapterLayout& layout) {
  Registered& r = registered();
  for (const auto& a : r.adapters)
    if (a->spec().command == command) return {};
  std::shared_ptr<Adapter> adapter = Adapter::start(command, timeout_seconds, layout);
  const AdapterSpec& spec = adapter->spec();
  for (const auto& a : r.adapters)
    if (a->spec().name == spec.name)
      throw ContractError("adapter '" + command + "' declares the name '" + spec.name + "', which adapter '" +
                          a->spec().command + "' already has");
  std::vector<std::unique_ptr<Backend>> pairs;
  const bool executor = spec.role == AdapterRole::executor;
  if (executor) {
    for (const Backend* b : builtin_backends())
      if (b->family() == spec.family) pairs.push_back(std::make_unique<PairBackend>(b, nullptr, nullptr, adapter));
  } else {
    pairs.push_back(std::make_unique<PairBackend>(nullptr, adapter, &find_family(spec.family)->executor(), nullptr));
  }
  for (const auto& other : r.adapters) {
    if (other->spec().family != spec.family || other->spec().role == spec.role) continue;
    pairs.push_back(executor ? std::make_unique<PairBackend>(nullptr, other, nullptr, adapter)
                             : std::make_unique<PairBackend>(nullptr, adapter, nullptr, other));
  }
  r.adapters.push_back(adapter);
  std::vector<const Backend*> added;
  for (auto& p : pairs) {
    added.push_back(p.get());
    r.all.push_back(p.get());
    r.owned.push_back(std::move(p));
  }
  return added;
}

}  // namespace kvfuzz
