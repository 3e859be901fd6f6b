// kvfuzz shrink: reduces a failing case while it fails the same way (same property, backend).
//
//   kvfuzz shrink finding.json -o small.json --backend fa    # prints the line that replays small.json
#include <algorithm>
#include <iostream>

#include "fuzz/cli/commands.h"
#include "fuzz/cli/options.h"
#include "properties/fingerprint.h"
#include "fuzz/replay.h"
#include "fuzz/shrink.h"
#include "reference/case_error.h"
#include "reference/io.h"
#include "reference/scenario_json.h"

namespace kvfuzz::cli {

void add_shrink(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("shrink", "Shrink a failing case to something a person can read");
  static std::string path, out, backend = "all";
  static std::vector<std::string> faults;
  static double seconds = 120;
  static uint64_t variant_seed = 0;
  static std::string wanted_key;
  cmd->add_option("case", path, "Failing case file (JSON), or - for standard input")->required();
  cmd->add_option("-o,--output", out, "Where to write the shrunk case (default: standard output)");
  cmd->add_option("--backend", backend, "Backend the case fails on, or all (the first failing one)")->capture_default_str();
  static AdapterOptions adapters;
  add_adapter_options(cmd, adapters);
  cmd->add_option("--fault", faults, "Named planner faults to keep switched on");
  cmd->add_option("--key", wanted_key, "Shrink while the case keeps this fingerprint key (default: its first finding's)");
  cmd->add_option("--seconds", seconds, "Time budget")->check(positive())->capture_default_str();
  cmd->add_option("--variant-seed", variant_seed, "Seed of the metamorphic variants (a campaign report names it)")
      ->check(seed_check())
      ->capture_default_str();
  cmd->callback([&exit_code] {
    register_adapters(adapters);
    const auto backends = select_backends(backend);
    check_faults(faults, backends);
    const Scenario s = load_case(path);
    const CaseReport report = check_all(s, backends, {faults, true, variant_seed});
    if (report.findings.empty()) {
      std::cerr << "kvfuzz shrink: the case does not fail on " << backend << "; nothing to shrink\n";
      exit_code = 2;
      return;
    }
    auto chosen = report.findings.begin();
    if (!wanted_key.empty()) {
      chosen = std::find_if(report.findings.begin(), report.findings.end(),
                            [&](const Finding& f) { return fingerprint_of(s, f).key() == wanted_key; });
      if (chosen == report.findings.end()) {
        std::cerr << "kvfuzz shrink: --key: no finding of the case has the fingerprint key '" << wanted_key << "'; its keys:\n";
        for (const Finding& f : report.findings) std::cerr << "  " << fingerprint_of(s, f).key() << "\n";
        exit_code = 2;
        return;
      }
    }
    const Finding& first = *chosen;
    const Backend* b = select_backends(first.backend).front();
    const bool meta = first.needs_variants();
    const std::string key = fingerprint_of(s, first).key();
    std::cerr << "shrinking while it fails as " << key << "\n";
    const std::vector<std::string> kept = faults_for(*b, faults);
    const uint64_t seed = meta ? variant_seed : 0;
    const ShrinkResult r = shrink(s, {key, b, kept, meta, seed, true}, {seconds, 100000});
    if (r.finding.property.empty()) {
      std::cerr << "kvfuzz shrink: the finding did not reproduce; the case is unchanged\n";
      exit_code = 2;
      return;
    }
    const CaseSize before = case_size(s), after = case_size(r.scenario);
    std::cerr << "requests " << before.requests << " -> " << after.requests << ", max tokens per request "
              << before.max_tokens << " -> " << after.max_tokens << ", history ops " << before.history_ops << " -> "
              << after.history_ops << ", layers " << before.layers << " -> " << after.layers << " (" << r.accepted << " of "
              << r.attempts << " reductions kept, " << r.seconds << " s)\n"
              << r.finding.backend << ": " << r.finding.property << ": " << r.finding.message << "\n";
    if (out.empty()) {
      std::cout << to_json(r.scenario);
    } else {
      write_file_atomic(out, to_json(r.scenario));
      std::cerr << "replay: " << replay_command({out, first.backend, kept, seed, adapter_flags(adapters)}) << "\n";
    }
    exit_code = 1;  // the shrunk case still fails: a finding
  });
}

}  // namespace kvfuzz::cli
