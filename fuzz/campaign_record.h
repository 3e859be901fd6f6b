// DIR/campaign.json: what a campaign ran and covered, for `kvfuzz report` to draw.
//
// Where it sits: written by run_campaign (campaign.cc) every ~10 s while it runs and once at its
// end, atomically, next to its findings; read by report_input.h. It holds the settings (seed,
// budget, jobs, profiles, backends, faults, shrinking), the rates (cases, seconds, cases/s,
// findings), each backend's checked / unsupported counts, the metamorphic variants and the
// coverage counts (coverage_counts.h). "finished" is false in the files written on the way.
//
//   CampaignRecordWriter record(options);
//   record.update(summary, cases_done, seconds);   // writes when ~10 s have passed since the last
//   record.finish(summary);                        // the final file
#pragma once

#include <cstdint>
#include <string>

#include "fuzz/campaign.h"

namespace kvfuzz {

inline constexpr int kCampaignRecordVersion = 1;

// The record as JSON text (format "kvfuzz-campaign", version kCampaignRecordVersion).
std::string campaign_record_json(const CampaignOptions& o, const CampaignSummary& s, int64_t cases, double seconds,
                                 bool finished);

// The time now as the record's "written" gives it ("2026-11-27T15:20:00Z").
std::string utc_time_now();

class CampaignRecordWriter {
 public:
  explicit CampaignRecordWriter(const CampaignOptions& o, double every_seconds = 10)
      : options_(o), every_(every_seconds) {}
  void update(const CampaignSummary& s, int64_t cases, double seconds);
  void finish(const CampaignSummary& s);

 private:
  const CampaignOptions& options_;
  double every_, last_ = 0;
};

}  // namespace kvfuzz
