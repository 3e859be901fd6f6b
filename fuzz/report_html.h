// The campaign report as one self-contained HTML page: no network, no server, inline CSS, the
// explain pictures as data: URIs.
//
// Where it sits: the last step of `kvfuzz report` (report_input.h reads the folder,
// report_pictures.h draws the pictures). The page holds the campaign's state and rates, the
// findings grouped by fingerprint key (label, count, picture, replay line, shrunk case), the
// coverage heat maps (cases checked per backend x mode x layer kind, page size, feature) and the
// settings. A small inline script marks the body once the page has loaded (data-groups,
// data-images, data-images-broken), which the headless-browser test reads.
//
//   write_file_atomic("report.html", render_report_html(in));
#pragma once

#include <string>

#include "fuzz/report_input.h"

namespace kvfuzz {

std::string render_report_html(const ReportInput& in);

// `s` with & < > " ' escaped for HTML text and attribute values.
std::string html_escape(const std::string& s);

}  // namespace kvfuzz
