// The list of backends: the built-in ones, plus the pairs that registered adapters form.
// Adding a built-in backend is a folder and a line in registry.cc; adding an external one is
// `--adapter CMD` on the command line (backends/contract/PROTOCOL.md).
//
//   for (const Backend* b : all_backends()) std::cout << b->name();
//   const Backend* fa = find_backend("fa");   // nullptr if unknown
//   register_adapter("python3 my_kernel.py", 60);   // adds "fa:my_kernel" etc.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"

namespace kvfuzz {

class Adapter;
struct AdapterLayout;

const std::vector<const Backend*>& all_backends();
const Backend* find_backend(std::string_view name);
// Built-in backends only.
const std::vector<const Backend*>& builtin_backends();

// Starts the adapter `command` (its first worker) and registers a pair backend for every
// built-in or registered counterpart of its family; returns them. Registering is not thread-safe:
// do it before campaigns start. Throws ContractError naming the adapter (bad input).
// `layout`: per-job workers (the default) or executor servers (adapter.h).
std::vector<const Backend*> register_adapter(const std::string& command, double timeout_seconds);
std::vector<const Backend*> register_adapter(const std::string& command, double timeout_seconds,
                                             const AdapterLayout& layout);
const std::vector<std::shared_ptr<Adapter>>& registered_adapters();

}  // namespace kvfuzz
