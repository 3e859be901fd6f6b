// kvfuzz report: one self-contained HTML page for a campaign's folder (coverage heat maps,
// findings by fingerprint with their pictures and replay lines, settings and rates).
//
//   kvfuzz report findings -o findings/report.html
#include <iostream>
#include <set>

#include "fuzz/cli/commands.h"
#include "fuzz/report_html.h"
#include "fuzz/report_input.h"
#include "fuzz/report_pictures.h"
#include "reference/io.h"

namespace kvfuzz::cli {

void add_report(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("report", "Write a campaign folder's report as one self-contained HTML page");
  static std::string dir, out;
  cmd->add_option("dir", dir, "The campaign's folder (kvfuzz run --out DIR)")->required();
  cmd->add_option("-o,--out", out, "The HTML file to write")->required();
  cmd->callback([&exit_code] {
    ReportInput in = load_report_input(dir);
    draw_pictures(in);
    write_file_atomic(out, render_report_html(in));
    std::set<std::string> roots;  // root-cause groups (properties/root_cause.h), each holding keys
    for (const FindingGroup& g : in.groups) roots.insert(g.root);
    std::cout << out << ": " << in.groups.size() << " fingerprint key" << (in.groups.size() == 1 ? "" : "s") << " in "
              << roots.size() << " root-cause group" << (roots.size() == 1 ? "" : "s") << "\n";
    exit_code = 0;
  });
}

}  // namespace kvfuzz::cli
