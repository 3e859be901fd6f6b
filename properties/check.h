// The single-case properties: run one backend on one case and say what is wrong.
//
// Where it sits: on top of the data flow; nothing depends on it but tests, fuzzers and the
// command line. For one backend and one case it checks:
//   in-bounds       every metadata write inside its buffer's capacity (checked buffers, guard
//                   zones), every read and write in the layer's pool and owned by the row's
//                   request (padded rows: the dummy page 0 only);
//   stride-divide   every table maps every visible key back to its req_to_token slot (SWA:
//                   translated) — from the plan's check_metadata;
//   metadata        the plan's other invariants (extents, maxima, prefix sums);
//   cache-extent    each query read exactly its visible set: none missing, none extra, none twice;
//   oracle          outputs and LSEs agree with the oracle within tolerance.h's bound;
//   crash           the backend threw something other than a Violation (run_backend).
// The multi-run properties (metamorphic, replay == eager) are in metamorphic.h.
//
//   CaseContext ctx(scenario);
//   CheckResult r = check_case(ctx, *find_backend("fa"));
//   if (!r.support.ok) ...; for (const Finding& f : r.findings) ...
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "properties/case_context.h"
#include "properties/finding.h"

namespace kvfuzz {

class ReadProbes;  // opaque_extent.h

struct BackendRun {
  Support support;
  bool ran = false;                  // plan and run finished without a Violation or a crash
  std::unique_ptr<Plan> plan;
  RunOutput out;
  std::vector<Finding> findings;     // in-bounds and metadata findings from planning and running
  std::shared_ptr<ReadProbes> probes;  // read_probes: the opaque read set's probes, run with the case
};

// Plans and runs `backend` on the case in a fresh copy of the pools. A lenient run (for
// explanations) records reads outside their pool as in-bounds findings and carries on.
// Exceptions: a Violation, or a read past the end of one of the backend's inputs
// (InputOutOfRange), is an in-bounds finding; anything else the backend throws is a "crash"
// finding; a HarnessError (kvfuzz's own checking code) is rethrown, never filed as a finding.
// `read_probes`, for a backend that logs no reads: the probes recover_reads decodes
// (opaque_extent.h) go in the same run_many as the case, one executor request for both.
BackendRun run_backend(const CaseContext& ctx, const Backend& backend, const std::vector<std::string>& faults = {},
                       bool lenient = false, bool read_probes = false);

struct CheckResult {
  Support support;
  std::vector<Finding> findings;
  std::vector<Finding> notes;  // information, not failures (masked reads of unowned slots)
};

CheckResult check_case(const CaseContext& ctx, const Backend& backend, const std::vector<std::string>& faults = {});

// The single-case properties of a run that has already happened (check_case = run_backend +
// this); the run is kept for the metamorphic comparisons.
CheckResult check_run(const CaseContext& ctx, const Backend& backend, const BackendRun& run);

// What a query of a finished run read, as logical columns of its own request, plus the reads
// that were not its own keys ("full slot 12 (request 3, column 0)").
struct ResolvedReads {
  std::vector<int64_t> columns;  // ascending, repeats kept
  std::vector<std::string> foreign;
  std::vector<std::string> foreign_kinds;  // read_diff.h's tags: other-request, unowned-slot, ...
  // False when the own columns could not be recovered (an opaque executor's probes did not
  // decode): `columns` is then empty and says nothing; only `foreign` is checked.
  bool columns_known = true;
};
ResolvedReads resolve_reads(const CaseContext& ctx, const BackendRun& run, int32_t layer, int64_t token);

// The columns query `token` (of a real row) must read in `layer`.
std::vector<int64_t> expected_columns(const CaseContext& ctx, int32_t layer, int64_t token);

// The read-set and oracle properties on a finished run (used by check_case and metamorphic runs).
// `reads_of` gives what each real query read; by default the run's read log.
// `mechanisms`, when given, receives the read-set mechanism (read_diff.h) of every query whose
// reads are wrong, reported or not; check_agreement files such a query's disagreement under it.
using ReadsOf = std::function<ResolvedReads(int32_t layer, int64_t token)>;
using ReadMechanisms = std::map<std::pair<int32_t, int64_t>, std::string>;  // (layer, token) -> mechanism
void check_extent(const CaseContext& ctx, const BackendRun& run, std::vector<Finding>& findings,
                  const ReadsOf& reads_of = nullptr, ReadMechanisms* mechanisms = nullptr);
// Rows whose tolerance has no bound (Tolerance::bounded) are counted in a note when `notes` is given.
void check_agreement(const CaseContext& ctx, const Backend& backend, const BackendRun& run,
                     std::vector<Finding>& findings, std::vector<Finding>* notes = nullptr,
                     const ReadMechanisms* reads = nullptr);

}  // namespace kvfuzz
