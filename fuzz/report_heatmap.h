// The coverage part of the campaign report: heat maps of the cases each backend checked, per
// forward mode x layer kind, per page size and per feature (coverage_counts.h), one row per
// backend, the first row every case generated. A cell's colour is its count against the row's
// largest (log scale), so a backend's gaps show whatever its volume; a pink cell is none checked.
//
//   std::ostringstream os;  coverage_heatmaps(os, load_report_input("findings"));
#pragma once

#include <ostream>

#include "fuzz/report_input.h"

namespace kvfuzz {

void coverage_heatmaps(std::ostream& os, const ReportInput& in);

}  // namespace kvfuzz
