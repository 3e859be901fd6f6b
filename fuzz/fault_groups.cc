#include "fuzz/fault_groups.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "fuzz/campaign.h"

namespace kvfuzz {

std::vector<FaultGroups> run_fault_groups(const FaultGroupsOptions& o, std::ostream& progress) {
  namespace fs = std::filesystem;
  std::vector<FaultGroups> rows;
  const fs::path scratch = fs::temp_directory_path() / ("kvfuzz-fault-groups-" + std::to_string(::getpid()));
  for (const Backend* b : o.backends) {
    for (const FaultInfo& f : b->faults()) {
      if (!o.only.empty() && std::find(o.only.begin(), o.only.end(), f.name) == o.only.end()) continue;
      CampaignOptions c;
      c.cases = o.cases;
      c.backends = {b};
      c.seed = o.seed;
      c.jobs = o.jobs;
      c.out_dir = (scratch / f.name).string();
      c.profiles = {f.profile.empty() ? Profile::tiny : parse_profile(f.profile).value()};  // FaultInfo::profile
      c.faults = {f.name};
      c.shrink = false;
      c.max_saved_per_kind = 1;
      c.live_progress = false;
      std::ostringstream quiet;
      const CampaignSummary s = run_campaign(c, quiet);
      FaultGroups row{std::string(b->name()), f.name, 0, {}, {}};
      for (const auto& [key, k] : s.kinds) row.keys.insert(key);
      for (const auto& [group, r] : s.root_groups) row.groups.insert(group);
      row.cases_with_findings = s.cases_with_findings;
      progress << "  " << std::left << std::setw(36) << f.name << row.keys.size() << " keys, " << row.groups.size()
               << " groups\n"
               << std::flush;
      rows.push_back(std::move(row));
    }
  }
  fs::remove_all(scratch);
  return rows;
}

bool print_fault_groups(const std::vector<FaultGroups>& rows, size_t max_groups, std::ostream& out) {
  bool ok = true;
  out << std::left << std::setw(36) << "fault" << std::setw(18) << "backend" << std::right << std::setw(8) << "cases"
      << std::setw(8) << "keys" << std::setw(8) << "groups"
      << "\n";
  for (const FaultGroups& r : rows) {
    const bool over = r.groups.size() > max_groups;
    ok = ok && !over;
    out << std::left << std::setw(36) << r.fault << std::setw(18) << r.backend << std::right << std::setw(8)
        << r.cases_with_findings << std::setw(8) << r.keys.size() << std::setw(8) << r.groups.size()
        << (over ? "  OVER " + std::to_string(max_groups) : "") << "\n";
  }
  for (const FaultGroups& r : rows)
    for (const std::string& g : r.groups) out << r.fault << ": " << g << "\n";
  size_t shared = 0;
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = i + 1; j < rows.size(); ++j)
      for (const std::string& g : rows[i].groups)
        if (rows[j].groups.count(g) > 0) {
          out << "shared by " << rows[i].fault << " and " << rows[j].fault << ": " << g << "\n";
          ++shared;
        }
  if (shared == 0) out << "no group shared by two faults\n";
  return ok && shared == 0;
}

}  // namespace kvfuzz
