// The explain picture of each finding group of a report: its saved (shrunk) case rerun through
// the built-in backend that failed, with the campaign's faults, drawn by explain.h.
//
// Where it sits: between report_input.h (the groups) and report_html.h (the page). External
// adapters are not started again: their groups get a note saying the picture was not drawn and
// the command that draws it. A case that no longer fails, or fails in a way explain does not
// draw (a crash, an oracle mismatch without wrong reads), gets a note too.
//
//   ReportInput in = load_report_input("findings");
//   draw_pictures(in);   // fills FindingGroup::picture_svg or picture_note
#pragma once

#include "fuzz/report_input.h"

namespace kvfuzz {

void draw_pictures(ReportInput& in);

}  // namespace kvfuzz
