// kvfuzz backends: lists each backend with what it supports and its named faults.
//
//   kvfuzz backends
#include <iostream>

#include "backends/registry.h"
#include "fuzz/cli/commands.h"
#include "fuzz/cli/options.h"

namespace kvfuzz::cli {

void add_backends(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("backends", "List the backends, what each supports, and its faults");
  static AdapterOptions adapters;
  add_adapter_options(cmd, adapters);
  cmd->callback([&exit_code] {
    register_adapters(adapters);
    for (const Backend* b : all_backends()) {
      std::cout << b->name() << "\n  " << b->summary() << "\n";
      for (const FaultInfo& f : b->faults()) std::cout << "  fault " << f.name << ": " << f.description << "\n";
    }
    exit_code = 0;
  });
}

}  // namespace kvfuzz::cli
