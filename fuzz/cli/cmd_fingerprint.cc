// kvfuzz fingerprint: the fingerprints of findings (properties/fingerprint.h), one JSON line each.
//
//   kvfuzz fingerprint findings/oracle-fa-17-3fa2c1.json        # a saved finding: its .finding.json
//   kvfuzz fingerprint case.json --backend fa --fault fa_local_token_table   # checks the case
//
// A line is {"file", "key", "fingerprint", "count", "replay"}, and for a checked case its root-cause
// "group" and "group_why" (properties/root_cause.h): what adapters/triage.py reads from a
// campaign's index.jsonl, so a corpus case can be triaged like a campaign's finding.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "fuzz/case_check.h"
#include "fuzz/cli/commands.h"
#include "fuzz/cli/options.h"
#include "fuzz/finding_index.h"
#include "fuzz/replay.h"
#include "properties/fingerprint.h"
#include "properties/root_cause.h"
#include "reference/case_error.h"
#include "reference/io.h"
#include "reference/scenario_json.h"

namespace kvfuzz::cli {

void add_fingerprint(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("fingerprint", "Print the fingerprints of saved findings, or of a case's findings on a backend");
  static std::vector<std::string> paths;
  static std::string backend;
  static std::vector<std::string> faults;
  static uint64_t variant_seed = 0;
  cmd->add_option("files", paths, "Saved findings (a campaign's .json or .finding.json), or case files with --backend")
      ->required();
  cmd->add_option("--backend", backend, "Check the case files on this backend (or all) and fingerprint what they find");
  static AdapterOptions adapters;
  add_adapter_options(cmd, adapters);
  cmd->add_option("--fault", faults, "Switch on a named planner fault (see kvfuzz faults --list)");
  cmd->add_option("--variant-seed", variant_seed, "Seed of the metamorphic variants (a campaign report names it)")
      ->check(seed_check());
  cmd->callback([&exit_code] {
    exit_code = 0;
    if (backend.empty()) {
      for (const std::string& path : paths) {
        const nlohmann::json record = read_finding_record(path);
        if (!record.contains("fingerprints") || !record["fingerprints"].is_array())
          throw InvalidCase(path + ": its fingerprint record has no \"fingerprints\" list");
        for (const nlohmann::json& fp : record["fingerprints"])
          std::cout << nlohmann::json{{"file", path}, {"key", fp.value("key", "")}, {"fingerprint", fp}, {"count", 1},
                                      {"replay", record.value("replay", "")}}
                           .dump()
                    << "\n";
      }
      return;
    }
    register_adapters(adapters);
    const auto backends = select_backends(backend);
    check_faults(faults, backends);
    for (const std::string& path : paths) {
      const Scenario s = load_case(path);
      const CaseReport report = check_all(s, backends, {faults, /*metamorphic=*/true, variant_seed});
      std::vector<std::pair<Fingerprint, int64_t>> keys;  // in the report's order
      for (const Finding& f : report.findings) {
        Fingerprint fp = fingerprint_of(s, f);
        auto it = std::find_if(keys.begin(), keys.end(), [&](const auto& k) { return k.first.key() == fp.key(); });
        if (it == keys.end()) keys.push_back({std::move(fp), 1});
        else ++it->second;
      }
      const std::string replay = replay_command({path, backend, faults, variant_seed, adapter_flags(adapters)});
      std::vector<Fingerprint> fps;
      for (const auto& k : keys) fps.push_back(k.first);
      const std::vector<RootCause> roots = root_causes(fps);
      for (size_t i = 0; i < keys.size(); ++i)
        std::cout << nlohmann::json{{"file", path},
                                    {"key", keys[i].first.key()},
                                    {"fingerprint", keys[i].first.to_json()},
                                    {"count", keys[i].second},
                                    {"replay", replay},
                                    {"group", roots[i].group},
                                    {"group_why", roots[i].why}}
                         .dump()
                  << "\n";
      if (keys.empty())
        std::cerr << path << ": no finding on " << backend << (report.unsupported.empty() ? "" : " (unsupported there)")
                  << "\n";
    }
  });
}

}  // namespace kvfuzz::cli
