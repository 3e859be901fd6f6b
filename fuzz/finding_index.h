// A campaign's record of every finding, by fingerprint: nothing capped, nothing lost.
//
// Where it sits: written by the campaign (campaign.cc) as each case finishes, read by
// adapters/triage.py, `kvfuzz report` and `kvfuzz fingerprint`. Two files:
//   DIR/index.jsonl          one line per (case, fingerprint key): the fingerprint, the case's
//                            number, seed and profile, how many findings of that key the case
//                            had, the first one's message, the saved case file (or null: saving
//                            is capped per key, the index is not) and a replay line that
//                            reproduces it either way (unsaved: it regenerates the case first);
//   <saved case>.finding.json  beside each saved case: its fingerprints and replay line.
// Each line is written whole with one write(2) on an O_APPEND descriptor and flushed, so a killed
// campaign loses at most the line in flight.
//
//   FindingIndex index("findings");
//   index.append(entry_json);
#pragma once

#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

namespace kvfuzz {

class FindingIndex {
 public:
  // Creates (truncates) DIR/index.jsonl. Throws std::runtime_error naming the file.
  explicit FindingIndex(const std::string& dir);
  ~FindingIndex();
  FindingIndex(const FindingIndex&) = delete;
  FindingIndex& operator=(const FindingIndex&) = delete;

  void append(const nlohmann::json& line);  // thread-safe
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::mutex mu_;
};

// `saved_case` with ".json" replaced by ".finding.json" ("a.min.json" -> "a.min.finding.json").
std::string finding_record_path(const std::string& saved_case);

// The record a campaign wrote beside a saved case (`path` is the case or the .finding.json);
// throws InvalidCase (exit 2) when there is none or it is not JSON.
//   nlohmann::json r = read_finding_record("findings/oracle-fa-17-3fa2c1.json");
nlohmann::json read_finding_record(const std::string& path);

}  // namespace kvfuzz
