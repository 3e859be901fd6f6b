// Upstream issue drafts: a known issue, its reproducer and what the reproducer printed, as the
// markdown a maintainer reads (docs/repro.md).
//
// Where it sits: beside repro.h, at the end of the flow (finding -> known issue -> reproducer ->
// report). The known issue comes from the known-issue files (adapters/*/known_issues.json: title,
// affected range, reach, effect, verdict); what the files cannot hold (triage.py reads them
// strictly) comes from adapters/repro/reports.json, keyed by issue id: the code location, the
// suggested fix and the committed reproducer; the reproducer's printed output on the buggy and the
// fixed release comes from its runs (ci/repro.sh reports).
//
//   nlohmann::json issue = find_known_issue({"adapters/sglang/known_issues.json"}, "", "corpus/sglang/a.json");
//   std::string md = issue_report(issue, notes, bundle, {{"sglang 0.5.23 (exit 1)", text}});
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvfuzz {

// The issue of id `id`, or (id empty) the one whose minimal_case names `case_path` (its path or a
// path ending it); throws InvalidCase naming the files searched when there is none.
nlohmann::json find_known_issue(const std::vector<std::string>& issue_files, const std::string& id,
                                const std::string& case_path);

// The sglang releases of the release matrix (corpus/sglang/README.md, ci/sglang.sh RELEASES) in
// [first, fixed) of the issue's affected range; empty for another package.
std::vector<std::string> affected_releases(const nlohmann::json& affected);

// A run of the reproducer: where it ran ("sglang 0.5.23, Triton interpreter: exit 1") and what it printed.
struct ReproOutput {
  std::string label;
  std::string text;
};

// The draft. `notes`: the issue's entry of adapters/repro/reports.json ({} if none): "location",
// "fix", "what" (what happens; default the verdict), "reach" and "effect" (default the entry's),
// "search" (what was searched upstream), "needs" (what the reproducer needs), "repro"
// (the committed reproducer's path), "run"
// (how to run it). `bundle`: repro_bundle() of the minimal case.
std::string issue_report(const nlohmann::json& issue, const nlohmann::json& notes, const nlohmann::json& bundle,
                         const std::vector<ReproOutput>& outputs);

}  // namespace kvfuzz
