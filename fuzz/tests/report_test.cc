// The campaign report's input and page: campaign.json as a campaign writes it, the finding index
// grouped by fingerprint key and labelled from triage.json, the explain pictures, and the errors a
// broken folder gets. The index fixtures follow docs/triage.md; the browser test
// (report_browser_test.sh) opens a real campaign's page.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/registry.h"
#include "fuzz/campaign.h"
#include "fuzz/campaign_record.h"
#include "fuzz/report_html.h"
#include "fuzz/report_input.h"
#include "fuzz/report_pictures.h"
#include "properties/tests/toy_backend.h"
#include "reference/case_error.h"
#include "reference/io.h"

namespace kvfuzz {
namespace {

namespace fs = std::filesystem;

std::string empty_dir(const std::string& name) {
  const auto dir = fs::temp_directory_path() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

// The message load_report_input throws for `dir`, or "" when it loads.
std::string load_error(const std::string& dir) {
  try {
    load_report_input(dir);
  } catch (const InvalidCase& e) {
    return e.what();
  }
  return "";
}

CampaignOptions options(const std::vector<const Backend*>& backends, const std::string& dir) {
  CampaignOptions o;
  o.cases = 24;
  o.backends = backends;
  o.jobs = 2;
  o.out_dir = dir;
  o.shrink = false;
  o.live_progress = false;
  return o;
}

// A campaign record with no findings, from a real (tiny) campaign.
void write_record(const std::string& dir, const std::vector<std::string>& faults = {}) {
  CampaignOptions o = options({find_backend("fa")}, dir);
  o.faults = faults;
  CampaignSummary s;
  s.cases = 1;
  s.seconds = 1;
  write_file_atomic(dir + "/campaign.json", campaign_record_json(o, s, 1, 1, true));
}

// An index line of docs/triage.md's format.
std::string index_line(const std::string& key, const std::string& backend, const std::string& executor, int64_t index,
                       int64_t count, const std::string& saved) {
  return R"({"key": ")" + key + R"(", "fingerprint": {"property": "stride-divide", "backend": ")" + backend +
         R"(", "planner": ")" + backend + R"(", "executor": ")" + executor +
         R"(", "release": "", "mode": "mixed", "layer": {"kind": "chunked", "window": 0, "chunk": 2}, "mechanism": "shifted-older", "context": {}}, "case_index": )" +
         std::to_string(index) + R"(, "case_seed": 5, "profile": "small", "count": )" + std::to_string(count) +
         R"(, "message": "key column 0 maps to slot 4 <b>", "saved": )" +
         (saved.empty() ? "null" : "\"" + saved + "\"") + R"(, "replay": "kvfuzz check x.json --backend )" + backend +
         "\"}\n";
}

TEST(CoverageCounts, CountsEachBackendThatCheckedTheCase) {
  const std::vector<const Backend*> backends = {find_backend("fa"), find_backend("mla")};
  const std::vector<std::string> checked = backends_checked(backends, {"mla: not an MLA model"});
  ASSERT_EQ(checked, std::vector<std::string>{"fa"});
  Scenario s = generate(7, Profile::small);
  CoverageCounts c;
  c.add(s, checked);
  c.add(s, checked);
  ASSERT_TRUE(c.by_backend.count("fa"));
  EXPECT_FALSE(c.by_backend.count("mla"));
  EXPECT_EQ(c.by_backend.at("fa").cases, 2);
  EXPECT_EQ(c.by_backend.at(CoverageCounts::kAllCases).cases, 2);
  EXPECT_EQ(c.by_backend.at("fa").page_sizes.at(s.cache.page_size), 2);
  const std::string mode = to_string(s.batch.mode), kind = to_string(s.model.layers[0].kind);
  EXPECT_EQ(c.by_backend.at("fa").mode_layer.at(mode).at(kind), 2);
}

TEST(Report, ACampaignWritesTheRecordTheReportReads) {
  const std::string dir = empty_dir("kvfuzz_report_record");
  std::ostringstream progress;
  const CampaignSummary s = run_campaign(options({find_backend("fa"), find_backend("mla")}, dir), progress);
  const ReportInput in = load_report_input(dir);
  EXPECT_TRUE(in.finished);
  EXPECT_TRUE(in.groups.empty());
  const BackendCoverage& all = in.coverage.by_backend.at(CoverageCounts::kAllCases);
  EXPECT_EQ(all.cases, s.cases);
  // mla answers every non-MLA case unsupported: it checked exactly the cases the summary says.
  const int64_t mla_checked =
      s.backend_runs.at("mla") - (s.backend_unsupported.count("mla") ? s.backend_unsupported.at("mla") : 0);
  const int64_t mla_counted = in.coverage.by_backend.count("mla") ? in.coverage.by_backend.at("mla").cases : 0;
  EXPECT_EQ(mla_counted, mla_checked);
  EXPECT_EQ(in.coverage.by_backend.at("fa").cases, s.cases);
  int64_t by_page = 0;
  for (const auto& [ps, n] : all.page_sizes) by_page += n;
  EXPECT_EQ(by_page, s.cases);
  bool seeds = false;
  for (const auto& [k, v] : in.settings) seeds |= k == "seed" && v == "1";
  EXPECT_TRUE(seeds);
}

TEST(Report, TheRecordIsRewrittenOnTheWayAndMarkedUnfinished) {
  const std::string dir = empty_dir("kvfuzz_report_on_the_way");
  const CampaignOptions o = options({find_backend("fa")}, dir);
  CampaignSummary s;
  CampaignRecordWriter record(o, 10);
  record.update(s, 3, 5);  // 5 s in: not yet due
  EXPECT_FALSE(fs::exists(dir + "/campaign.json"));
  record.update(s, 7, 12);
  ASSERT_TRUE(fs::exists(dir + "/campaign.json"));
  ReportInput in = load_report_input(dir);
  EXPECT_FALSE(in.finished);
  bool cases = false;
  for (const auto& [k, v] : in.rates) cases |= k == "cases" && v == "7";
  EXPECT_TRUE(cases);
  s.cases = 9;
  s.seconds = 13;
  record.finish(s);
  EXPECT_TRUE(load_report_input(dir).finished);
}

// Keys are shown by root-cause group (the index's "group"): a group's keys together, the group
// with a NEW key first even when another group has more findings; a line without one is its own.
TEST(Report, ShowsRootCauseGroupsFirstAndTheirKeysInside) {
  const std::string dir = empty_dir("kvfuzz_report_root_groups");
  write_record(dir, {});
  const auto grouped = [](std::string line, const std::string& group) {
    return line.insert(line.rfind('}'), R"(, "group": ")" + group + "\"");
  };
  const std::string a = "metadata fa decode full x", b = "cache-extent fa decode full y", c = "oracle fa decode full z",
                    d = "cache-extent fa extend full w";
  std::ofstream(dir + "/index.jsonl") << grouped(index_line(a, "fa", "", 1, 1, ""), "fa: metadata: x")
                                      << grouped(index_line(d, "fa", "", 2, 50, ""), "fa: reads on full: w")
                                      << grouped(index_line(c, "fa", "", 1, 7, ""), "fa: metadata: x")
                                      << grouped(index_line(b, "fa", "", 1, 3, ""), "fa: metadata: x");
  std::ofstream(dir + "/triage.json") << R"({"groups": [{"key": ")" << a << R"(", "label": "known"}, {"key": ")" << b
                                      << R"(", "label": "NEW"}, {"key": ")" << c << R"(", "label": "known"}, {"key": ")"
                                      << d << R"(", "label": "known"}]})";
  const ReportInput in = load_report_input(dir);
  ASSERT_EQ(in.groups.size(), 4u);
  EXPECT_EQ(in.groups[0].root, "fa: metadata: x");  // holds a NEW key: first, though w has more findings
  EXPECT_EQ(in.groups[0].key, b);                   // NEW first inside it
  EXPECT_EQ(in.groups[1].key, c);                   // then by findings
  EXPECT_EQ(in.groups[2].key, a);
  EXPECT_EQ(in.groups[3].root, "fa: reads on full: w");
  const std::string html = render_report_html(in);
  EXPECT_NE(html.find("root-cause group <code>fa: metadata: x</code></td>"), std::string::npos);
  EXPECT_LT(html.find("root-cause group <code>fa: metadata: x</code></td>"),
            html.find("root-cause group <code>fa: reads on full: w</code></td>"));
}

TEST(Report, GroupsTheIndexByKeyAndLabelsFromTriage) {
  const std::string dir = empty_dir("kvfuzz_report_groups");
  write_record(dir, {"fa_local_token_table"});
  fs::copy_file(std::string(KVFUZZ_CORPUS) + "/regressions/fa__fa_local_token_table.json",
                dir + "/stride-divide-fa-3.json");
  const std::string a = "stride-divide fa mixed chunked shifted-older", b = "crash ext:numpy mixed chunked boom";
  std::ofstream(dir + "/index.jsonl") << index_line(a, "fa", "", 9, 3, dir + "/stride-divide-fa-3.json")
                                      << index_line(a, "fa", "", 3, 2, "") << index_line(b, "ext", "numpy", 4, 1, "");
  ReportInput in = load_report_input(dir);
  ASSERT_EQ(in.groups.size(), 2u);
  EXPECT_EQ(in.groups[0].key, a);  // most findings first among the untriaged
  EXPECT_EQ(in.groups[0].count, 5);
  EXPECT_EQ(in.groups[0].cases, 2);
  EXPECT_EQ(in.groups[0].first_case, 3);
  EXPECT_EQ(in.groups[0].label, "untriaged");
  EXPECT_FALSE(in.groups[0].shrunk);
  EXPECT_EQ(in.groups[0].case_file, dir + "/stride-divide-fa-3.json");

  std::ofstream(dir + "/triage.json")
      << R"({"issues_file": "x", "groups": [
      {"key": ")"
      << a << R"(", "label": "known", "issue": "sglang#32902", "count": 5, "cases": 2, "saved": [], "replay": ""},
      {"key": ")"
      << b << R"(", "label": "NEW", "issue": null, "count": 1, "cases": 1, "saved": [], "replay": ""}]})";
  in = load_report_input(dir);
  ASSERT_EQ(in.groups.size(), 2u);
  EXPECT_EQ(in.groups[0].key, b);  // NEW before known
  EXPECT_EQ(in.groups[0].label, "NEW");
  EXPECT_EQ(in.groups[1].issue, "sglang#32902");

  draw_pictures(in);
  EXPECT_TRUE(in.groups[0].picture_svg.empty());  // an adapter's finding: not drawn, and said so
  EXPECT_NE(in.groups[0].picture_note.find("not drawn"), std::string::npos) << in.groups[0].picture_note;
  EXPECT_NE(in.groups[1].picture_svg.find("<svg"), std::string::npos) << in.groups[1].picture_note;

  const std::string html = render_report_html(in);
  EXPECT_NE(html.find("data-key=\"" + a + "\""), std::string::npos);
  EXPECT_NE(html.find("data-key=\"" + b + "\""), std::string::npos);
  EXPECT_NE(html.find("src=\"data:image/svg+xml;base64,"), std::string::npos);
  EXPECT_NE(html.find("slot 4 &lt;b&gt;"), std::string::npos) << "messages are escaped";
  EXPECT_EQ(html.find("slot 4 <b>"), std::string::npos);
  EXPECT_EQ(html.find("http://"), std::string::npos) << "self-contained: no link out";
  EXPECT_EQ(html.find("https://"), std::string::npos) << "self-contained: no link out";
}

TEST(Report, TakesTheShrunkCaseTheIndexNames) {
  const std::string dir = empty_dir("kvfuzz_report_shrunk");
  write_record(dir);
  const std::string c = std::string(KVFUZZ_CORPUS) + "/regressions/fa__fa_local_token_table.json";
  fs::copy_file(c, dir + "/oracle-fa-7.json");
  fs::copy_file(c, dir + "/oracle-fa-7.min.json");
  std::ofstream(dir + "/oracle-fa-7.min.txt")
      << "case 7\nreplay: kvfuzz check " << dir << "/oracle-fa-7.min.json --backend fa\n";
  std::ofstream(dir + "/index.jsonl") << index_line("k", "fa", "", 7, 1, dir + "/oracle-fa-7.min.json");
  const ReportInput in = load_report_input(dir);
  ASSERT_EQ(in.groups.size(), 1u);
  EXPECT_TRUE(in.groups[0].shrunk);
  EXPECT_EQ(in.groups[0].case_file, dir + "/oracle-fa-7.min.json");
  EXPECT_EQ(in.groups[0].replay, "kvfuzz check " + dir + "/oracle-fa-7.min.json --backend fa");  // from the .min.txt
}

TEST(Report, ABrokenFolderIsRefusedNamingWhatIsWrong) {
  EXPECT_NE(load_error("/nonexistent/kvfuzz").find("no such folder"), std::string::npos);
  const std::string dir = empty_dir("kvfuzz_report_broken");
  EXPECT_NE(load_error(dir).find("campaign.json not found"), std::string::npos) << load_error(dir);
  std::ofstream(dir + "/campaign.json") << "{\"format\": \"something else\"}";
  EXPECT_NE(load_error(dir).find("not a kvfuzz campaign record"), std::string::npos) << load_error(dir);
  write_record(dir);
  EXPECT_EQ(load_error(dir), "");  // no findings, no index: an empty report
  std::ofstream(dir + "/index.jsonl") << index_line("k", "fa", "", 1, 1, "") << "{not json\n";
  EXPECT_NE(load_error(dir).find("index.jsonl line 2: not JSON"), std::string::npos) << load_error(dir);
  std::ofstream(dir + "/index.jsonl") << index_line("k", "fa", "", 1, 1, dir + "/gone.json");
  EXPECT_NE(load_error(dir).find("gone.json not found"), std::string::npos) << load_error(dir);
  std::ofstream(dir + "/index.jsonl") << index_line("k", "fa", "", 1, 1, "");
  std::ofstream(dir + "/triage.json") << R"({"groups": [{"key": "k", "label": "maybe"}]})";
  EXPECT_NE(load_error(dir).find("label 'maybe'"), std::string::npos) << load_error(dir);
}

}  // namespace
}  // namespace kvfuzz
