// Standalone reproducers: a finding's case as the data of a Python script that needs only the
// kernel or engine package, torch and numpy (docs/repro.md).
//
// Where it sits: after a finding (a saved case and its .finding.json, or a case and a backend).
// repro_bundle() replays the case into what the script embeds — the batch's logical content
// (each row's columns with their slot and position, each query's token, position and structural
// keys), the layer rules, the values' seed and, for a built-in planner, the kernel metadata it
// built (the family's plan, arrays as lists); repro_script() splices that into a template of
// adapters/repro/, one per kernel family. The script computes the expected output itself, in
// float64 from logical positions, and exits 1 when the bug is there.
//
//   nlohmann::json b = repro_bundle(load_case("case.json"), "flashinfer_paged:flashinfer_paged_csr", {});
//   std::string py = repro_script(b, read_input(templates + "/" + b["target"].get<std::string>() + ".py"));
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "reference/scenario.h"

namespace kvfuzz {

// The template a finding on `backend` ("planner:executor", a release in the planner's name
// allowed) is reproduced with, a file name under adapters/repro/ without ".py"; throws
// InvalidCase naming the backend when there is none.
std::string repro_target(const std::string& backend);

// What the script embeds (docs/repro.md lists the fields). `finding`: the fingerprint record's
// first fingerprint, key and replay line, carried for the script's header ({} when checked
// from a case). Throws InvalidCase when the case cannot be prepared.
nlohmann::json repro_bundle(const Scenario& s, const std::string& backend, const nlohmann::json& finding);

// The template with its `BUNDLE = None  # kvfuzz repro` line replaced by the bundle (JSON in a raw
// string, one field a line, each row and each array of the engine's request a line); throws
// InvalidCase when the template has no such line.
std::string repro_script(const nlohmann::json& bundle, const std::string& template_text);

// A reproducer as the script a person reads and, beside it, kvfuzz's harness it imports.
struct ReproFiles {
  std::string harness_file;  // "kvfuzz_repro_<target>.py" ("" with one_file)
  std::string harness;       // its text: common.py, the target's template, the modules it embeds
  std::string body;          // the script: the batch (BUNDLE), the engine's calls, the comparison
};

// "kvfuzz_repro_<target>": the module name of the bundle's harness (one per target, shared by the
// reproducers written into one folder).
std::string repro_harness_name(const nlohmann::json& bundle);

// The body (`body_template`: adapters/repro/body.py or the target's <target>_body.py) with the
// bundle, importing the harness (`harness_template`: common.py + the target's template, modules
// embedded) as `kv`; with one_file, one script of both, the harness first. Throws InvalidCase when a
// template lacks its marker line.
//   ReproFiles f = repro_files(bundle, repro_embed(common + tpl, "adapters"), body_py, false);
ReproFiles repro_files(const nlohmann::json& bundle, const std::string& harness_template,
                       const std::string& body_template, bool one_file);

// The template with its `EMBEDDED = {}  # kvfuzz repro embeds: NAME=PATH ...` line (if any)
// replaced by each file's source as `EMBEDDED["NAME"] = r'''...'''` (PATH relative to
// `adapters_dir`, kvfuzz's adapters/): the script carries the few kvfuzz modules it imports, copied
// from their one source at generation time, and so needs no kvfuzz checkout. Throws InvalidCase
// naming a file that is missing or cannot sit in a raw string.
//   std::string t = repro_embed(read_input("adapters/repro/sglang_metadata.py", kMaxCaseBytes), "adapters");
std::string repro_embed(const std::string& template_text, const std::string& adapters_dir);

}  // namespace kvfuzz
