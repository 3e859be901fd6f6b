// What `kvfuzz report` reads from a campaign's folder, checked: the campaign record, the finding
// index grouped by fingerprint key, and the verdicts of adapters/triage.py when there are any.
//
// Where it sits: after a campaign (campaign_record.h writes DIR/campaign.json; the campaign writes
// DIR/index.jsonl and the saved findings, docs/triage.md; triage.py writes DIR/triage.json), before
// report_pictures.h (the explain pictures) and report_html.h (the page). A folder that is not a
// campaign's, or a file in it that does not parse, throws InvalidCase naming the file (exit 2).
//
//   ReportInput in = load_report_input("findings");
//   for (const FindingGroup& g : in.groups) std::cout << g.label << " " << g.key << "\n";
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/coverage_counts.h"

namespace kvfuzz {

struct FindingGroup {
  std::string key;    // the fingerprint key
  std::string root;   // its root-cause group (properties/root_cause.h; the index's "group", else the key)
  std::string label;  // "NEW", "regression", "known" (triage.json) or "untriaged"
  std::string issue;  // the known issue triage matched, "" if none
  std::string property, backend, executor, mode, layer, mechanism;  // of the first fingerprint
  int64_t count = 0;                                                // findings (queries, heads) in all cases
  int64_t cases = 0;                                                // cases with this key
  int64_t first_case = -1;                                          // the lowest case index
  std::string message;                                              // the first finding's report text
  std::string case_file;    // the best saved case (.min.json when shrunk), "" if none saved
  std::string case_text;    // its contents
  std::string report_text;  // its human report (.min.txt or .txt)
  bool shrunk = false;
  std::string replay;        // the line that replays case_file (or the index's, if none saved)
  std::string picture_svg;   // the explain picture, filled by report_pictures.h
  std::string picture_note;  // why there is none
};

struct ReportInput {
  std::string dir;
  bool finished = false;
  std::string written;                                        // when campaign.json was written (UTC)
  std::string host;                                           // "name, N cores"
  std::vector<std::pair<std::string, std::string>> settings;  // name, value as text
  std::vector<std::pair<std::string, std::string>> rates;
  struct BackendRow {
    std::string name;
    int64_t offered = 0, checked = 0, unsupported = 0;
  };
  std::vector<BackendRow> backends;
  std::vector<std::pair<std::string, std::vector<int64_t>>> variants;  // name, {run, invalid, unsupported}
  std::string coverage_line;
  CoverageCounts coverage;
  std::vector<std::string> faults;   // the campaign's --fault flags
  std::string triage_file;           // DIR/triage.json when present
  // Grouped by root cause: the groups with a NEW key first, then regression, untriaged, known, most
  // findings first; inside a group its keys in the same order.
  std::vector<FindingGroup> groups;
};

ReportInput load_report_input(const std::string& dir);

}  // namespace kvfuzz
