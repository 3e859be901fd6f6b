// kvfuzz explain: expected and actually read key positions of each failing query, as text and SVG.
//
//   kvfuzz explain small.json --backend fa --svg small.svg
#include <iostream>

#include "fuzz/cli/commands.h"
#include "fuzz/cli/options.h"
#include "fuzz/explain.h"
#include "reference/io.h"
#include "reference/scenario_json.h"

namespace kvfuzz::cli {

void add_explain(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("explain", "Show each failing query's expected and read keys, with page boundaries");
  static std::string path, svg, backend = "all";
  static std::vector<std::string> faults;
  cmd->add_option("case", path, "Case file (JSON), or - for standard input")->required();
  cmd->add_option("--backend", backend, "Backend name, or all")->capture_default_str();
  static AdapterOptions adapters;
  add_adapter_options(cmd, adapters);
  cmd->add_option("--fault", faults, "Named planner faults to switch on");
  cmd->add_option("--svg", svg, "Also write the picture to this SVG file");
  cmd->callback([&exit_code] {
    register_adapters(adapters);
    const auto backends = select_backends(backend);
    check_faults(faults, backends);
    const Scenario s = load_case(path);
    int findings = 0;
    std::string pictures;
    for (const Backend* b : backends) {
      const Explanation e = explain(s, *b, faults);
      std::cout << e.text;
      findings += e.findings;
      if (pictures.empty()) pictures = e.svg;
    }
    if (!svg.empty()) {
      if (pictures.empty()) std::cerr << "kvfuzz explain: no failing query to draw; " << svg << " not written\n";
      else write_file_atomic(svg, pictures);
    }
    exit_code = findings > 0 ? 1 : 0;
  });
}

}  // namespace kvfuzz::cli
