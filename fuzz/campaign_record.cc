#include "fuzz/campaign_record.h"

#include <chrono>
#include <ctime>
#include <thread>

#include <unistd.h>
#include <nlohmann/json.hpp>

#include "reference/io.h"

namespace kvfuzz {
namespace {

using json = nlohmann::ordered_json;

std::string host_name() {
  char buf[256] = {};
  return gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string();
}

}  // namespace

std::string utc_time_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string campaign_record_json(const CampaignOptions& o, const CampaignSummary& s, int64_t cases, double seconds,
                                 bool finished) {
  json backends = json::array(), profiles = json::array();
  for (const Backend* b : o.backends) backends.push_back(std::string(b->name()));
  for (const Profile p : o.profiles) profiles.push_back(std::string(to_string(p)));
  json settings = {{"seed", o.seed},
                   {"seconds", o.seconds},
                   {"cases", o.cases},
                   {"jobs", o.jobs},
                   {"profiles", profiles},
                   {"backends", backends},
                   {"faults", o.faults},
                   {"metamorphic_every", o.metamorphic_every},
                   {"shrink", o.shrink},
                   {"shrink_seconds", o.shrink_seconds},
                   {"max_saved_per_kind", o.max_saved_per_kind},
                   {"reuse_shapes", o.reuse_shapes},
                   {"shape_run", o.shape_run},
                   {"shape_seed", o.shape_seed.value_or(o.seed)},
                   {"shard", std::to_string(o.shard_index) + "/" + std::to_string(o.shard_count)},
                   {"shard_block", o.shard_rule().block}};  // fuzz/shard.h; absent (before): 1
  json per_backend = json::object();
  for (const auto& [name, offered] : s.backend_runs) {
    const auto it = s.backend_unsupported.find(name);
    const int64_t unsupported = it == s.backend_unsupported.end() ? 0 : it->second;
    per_backend[name] = {{"offered", offered}, {"checked", offered - unsupported}, {"unsupported", unsupported}};
  }
  json variants = json::object();
  for (const auto& [name, t] : s.variants)
    variants[name] = {{"run", t.run}, {"invalid", t.invalid}, {"unsupported", t.unsupported}};
  json coverage = {{"line", s.coverage.line()}, {"by_backend", json::object()}};
  for (const auto& [name, c] : s.counts.by_backend) coverage["by_backend"][name] = to_json(c);
  coverage["touched"] = s.coverage.to_json();
  const json record = {{"format", "kvfuzz-campaign"},
                       {"version", kCampaignRecordVersion},
                       {"finished", finished},
                       {"stopped", s.stopped},
                       {"written", utc_time_now()},
                       {"host", {{"name", host_name()}, {"cores", std::thread::hardware_concurrency()}}},
                       {"settings", settings},
                       {"rates",
                        {{"cases", cases},
                         {"seconds", seconds},
                         {"cases_per_second", seconds > 0 ? static_cast<double>(cases) / seconds : 0.0},
                         {"findings", s.findings()},
                         {"finding_kinds", s.kinds.size()},
                         {"finding_groups", s.root_groups.size()},
                         {"harness_errors", s.harness_errors}}},
                       {"backends", per_backend},
                       {"variants", variants},
                       {"coverage", coverage}};
  return record.dump(1) + "\n";
}

void CampaignRecordWriter::update(const CampaignSummary& s, int64_t cases, double seconds) {
  if (seconds - last_ < every_) return;
  last_ = seconds;
  write_file_atomic(options_.out_dir + "/campaign.json", campaign_record_json(options_, s, cases, seconds, false));
}

void CampaignRecordWriter::finish(const CampaignSummary& s) {
  write_file_atomic(options_.out_dir + "/campaign.json", campaign_record_json(options_, s, s.cases, s.seconds, true));
}

}  // namespace kvfuzz
