// kvfuzz repro: a finding as a standalone Python reproducer, or as an upstream issue draft.
//
//   kvfuzz repro findings/cache-extent-triton-17-3fa2c1.json -o repro.py    # a saved finding
//   kvfuzz repro corpus/gpu/sglang_triton_window0.json --backend triton:sglang_triton -o repro.py
//   kvfuzz repro corpus/sglang/triton_no_local.json --backend sglang_triton_0_5_23:triton --report
//       --run-output "sglang 0.5.23: exit 1=out.txt" -o report.md       (one command line)
//
// The script (-o FILE) is adapters/repro/body.py (or the target's <target>_body.py) with the case's
// data; beside it, kvfuzz_repro_<target>.py, the harness it imports: adapters/repro/common.py, then the
// target's template (fuzz/repro.h picks it) with the kvfuzz modules it names embedded. --one-file (and
// -o -) writes both as one script. docs/repro.md describes them and the exit codes of the script.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>

#include "fuzz/cli/commands.h"
#include "fuzz/finding_index.h"
#include "fuzz/replay.h"
#include "fuzz/repro.h"
#include "fuzz/repro_report.h"
#include "reference/case_error.h"
#include "reference/io.h"
#include "reference/scenario_json.h"

namespace kvfuzz::cli {
namespace {

std::string read_text(const std::string& path, const char* what) {
  if (!std::filesystem::is_regular_file(path)) throw InvalidCase(std::string(what) + " " + path + " does not exist");
  return read_input(path, kMaxCaseBytes);
}

// The --backend of a replay line ("kvfuzz check F --backend B ..."), quoted or not.
std::string replay_backend(const std::string& replay) {
  std::smatch m;
  if (std::regex_search(replay, m, std::regex(R"(--backend\s+('([^']*)'|(\S+)))")))
    return m[2].matched ? m[2].str() : m[3].str();
  return "";
}

struct SavedFinding {
  std::string case_path, backend;
  nlohmann::json record;  // {"case", "key", "fingerprint", "replay"}
};

// A saved finding (its record names the case and the backend) or a case with --backend.
SavedFinding resolve(const std::string& path, const std::string& backend) {
  if (!backend.empty())
    return {path, backend, {{"case", path}, {"replay", portable_replay_command({path, backend, {}, 0, {}})}}};
  const nlohmann::json record = read_finding_record(path);
  const std::string replay = record.value("replay", "");
  SavedFinding f{record.value("case", ""), replay_backend(replay), nullptr};
  if (f.backend.empty()) throw InvalidCase(path + ": its record's replay line names no --backend; pass --backend");
  if (!std::filesystem::exists(f.case_path))  // a campaign folder moved since: the record's neighbour
    f.case_path = (std::filesystem::path(path).parent_path() / std::filesystem::path(f.case_path).filename()).string();
  const nlohmann::json fp =
      record.contains("fingerprints") && !record["fingerprints"].empty() ? record["fingerprints"][0] : nlohmann::json();
  f.record = {{"case", f.case_path},
              {"key", fp.is_object() ? fp.value("key", "") : ""},
              {"fingerprint", fp},
              {"replay", replay}};
  return f;
}

// "LABEL=FILE" -> the label and the file's text.
ReproOutput run_output(const std::string& spec) {
  const size_t eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    throw InvalidCase("--run-output " + spec + ": expected LABEL=FILE");
  return {spec.substr(0, eq), read_text(spec.substr(eq + 1), "--run-output file")};
}

void write_out(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    return;
  }
  std::ofstream out(path);
  if (!(out << text)) throw InvalidCase("-o " + path + ": cannot write");
}

}  // namespace

void add_repro(CLI::App& app, int& exit_code) {
  auto* cmd =
      app.add_subcommand("repro", "Write a standalone Python reproducer of a finding, or an upstream issue draft");
  static std::string path, backend, output = "-", issue_id;
  static std::string source = KVFUZZ_SOURCE_DIR;
  static std::string templates, notes_file;
  static std::vector<std::string> issue_files, outputs;
  static bool report = false, one_file = false;
  cmd->add_option("finding", path, "A saved finding (a campaign's .json or .finding.json), or a case with --backend")
      ->required();
  cmd->add_option("--backend", backend, "The planner:executor pair the case is reproduced on (a case file)");
  cmd->add_option("-o,--output", output, "Where to write the script or the report (- for standard output)")
      ->capture_default_str();
  cmd->add_flag("--report", report, "Write an upstream issue draft (markdown) instead of the script");
  cmd->add_flag("--one-file", one_file,
                "One script, kvfuzz's harness included (default with -o FILE: the script, and the harness it imports "
                "beside it as kvfuzz_repro_<target>.py)");
  cmd->add_option("--issue", issue_id,
                  "The known issue the report is about (default: the one whose minimal case it is)");
  cmd->add_option("--issues", issue_files,
                  "Known-issue files (default adapters/sglang and adapters/gpu known_issues.json)");
  cmd->add_option("--notes", notes_file, "Report notes by issue id (default adapters/repro/reports.json)");
  cmd->add_option("--run-output", outputs, "LABEL=FILE: a run of the reproducer to quote in the report (repeatable)");
  cmd->add_option("--templates", templates, "Folder of the templates (default adapters/repro of the source tree)");
  cmd->callback([&exit_code] {
    exit_code = 0;
    const std::filesystem::path src(source);
    const std::string dir = templates.empty() ? (src / "adapters" / "repro").string() : templates;
    const SavedFinding f = resolve(path, backend);
    const Scenario s = load_case(f.case_path);
    const nlohmann::json bundle = repro_bundle(s, f.backend, f.record);
    if (!report) {
      const std::string target = bundle["target"].get<std::string>();
      const std::string file = dir + "/" + target + ".py";
      if (!std::filesystem::exists(file))
        throw InvalidCase("--backend " + f.backend + ": its reproducer template " + file +
                          " is not written yet (--report still drafts the report; kvfuzz explain shows the keys)");
      const std::string text = read_text(dir + "/common.py", "template") + "\n\n" + read_text(file, "template");
      const std::string own_body = dir + "/" + target + "_body.py";
      const std::string body = read_text(std::filesystem::exists(own_body) ? own_body : dir + "/body.py", "template");
      // the modules a template embeds are named relative to adapters/, the templates' parent
      const ReproFiles files = repro_files(bundle, repro_embed(text, (std::filesystem::path(dir) / "..").string()),
                                           body, one_file || output == "-");
      write_out(output, files.body);
      if (!files.harness_file.empty())
        write_out((std::filesystem::path(output).parent_path() / files.harness_file).string(), files.harness);
      return;
    }
    std::vector<std::string> files = issue_files;
    if (files.empty())
      for (const char* engine : {"sglang", "gpu"})
        files.push_back((src / "adapters" / engine / "known_issues.json").string());
    const nlohmann::json issue = find_known_issue(files, issue_id, f.case_path);
    const std::string nf = notes_file.empty() ? (src / "adapters" / "repro" / "reports.json").string() : notes_file;
    nlohmann::json notes = nlohmann::json::object();
    if (std::filesystem::exists(nf)) {
      try {
        notes =
            nlohmann::json::parse(read_input(nf, kMaxCaseBytes)).value(issue.value("id", ""), nlohmann::json::object());
      } catch (const nlohmann::json::exception& e) {
        throw InvalidCase(nf + ": not a notes file: " + e.what());
      }
    }
    std::vector<ReproOutput> runs;
    for (const std::string& spec : outputs) runs.push_back(run_output(spec));
    write_out(output, issue_report(issue, notes, bundle, runs));
  });
}

}  // namespace kvfuzz::cli
