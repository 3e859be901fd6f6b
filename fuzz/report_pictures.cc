#include "fuzz/report_pictures.h"

#include "backends/registry.h"
#include "fuzz/case_check.h"
#include "fuzz/explain.h"
#include "reference/scenario_json.h"

namespace kvfuzz {

void draw_pictures(ReportInput& in) {
  for (FindingGroup& g : in.groups) {
    const Backend* b = g.executor.empty() ? find_backend(g.backend) : nullptr;
    if (b == nullptr) {
      g.picture_note = "not drawn: " + g.backend +
                       " runs in an external adapter, which the report does not start; draw it with kvfuzz explain " +
                       (g.case_file.empty() ? "CASE" : g.case_file) +
                       " --backend NAME --adapter COMMAND --svg picture.svg";
      continue;
    }
    if (g.case_file.empty()) {
      g.picture_note = "no case saved for this group";
      continue;
    }
    try {
      const Explanation e = explain(scenario_from_json(g.case_text), *b, faults_for(*b, in.faults));
      if (!e.svg.empty()) g.picture_svg = e.svg;
      else g.picture_note = "no picture: explain found no query reading wrong keys in this case (" + g.property + ")";
    } catch (const std::exception& e) {
      g.picture_note = std::string("no picture: explain failed on this case: ") + e.what();
    }
  }
}

}  // namespace kvfuzz
