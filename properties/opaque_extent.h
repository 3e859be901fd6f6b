// The read set of an executor that logs nothing, recovered from its outputs, and the poisoned
// slots it touches.
//
// Where it sits: check_run (check.h) calls it for backends whose records_reads() is false
// (external executors). It runs the executor on the same plan with designed values, all in one
// run_many round trip (check_case's: the case's own values and the probes' together), and decodes
// what each query read:
//   - probe values: Q = 0 and K = 0, so every logit is exactly 0 and every key a query reads gets
//     weight exactly 1/m (m = its number of reads, with repeats; LSE = ln m). V is a one-hot code
//     over C = kv_heads x v_head_dim channels, so output channel c is exactly (reads whose code is
//     c) / m — an integer count once multiplied by m, whatever the kernel's tiling, splits,
//     cascades or output dtype (a count below 64 survives bf16 rounding).
//   - owner probes give each key the channel of its owner: the batch row of its request, "another
//     request", or "no live token" (free, evicted, the dummy page, past the end of a page); base-C
//     digits when there are more owners than channels. Any read not of the query's own request is
//     a foreign read (in-bounds).
//   - column probes give column c of every request the channel c mod C in probe c / C, so the
//     counts name exactly which of its own columns a query read and how often (cache-extent: none
//     missing, none extra, none twice).
//   - a NaN-poison run: the main run holds finite poison (K 0, V huge: a masked read — loaded, then
//     weighted exactly 0 — cannot change the answer, a used one must); if the same plan with NaN in
//     unowned slots gives non-finite outputs where the finite run was right, the kernel loaded
//     unowned slots and masked them: reported as a note (information), not a finding.
//
// Column probes need ceil(columns / (C x per_channel)) sets, each carrying the case's written
// pools (kvfuzz holds them all at once, the adapter reads them all). What limits them is that
// cost, not their count (the CPU profiles' narrow heads need hundreds of cheap sets): when the
// column probe sets would carry more than kMaxProbeValues pool values in all — a `long` case's
// 131072 keys need 16 to 171 sets of up to 2^29 values — they are skipped: `extent_skipped` says
// so ("extent not checked: N probe sets needed", a note, never a pass), the reads carry no
// columns, and the owner probes (one set for the long profile's few requests) still find
// foreign reads; oracle agreement runs as always.
//
//   OpaqueReads r = recover_reads(ctx, backend, run);
//   ResolvedReads q = r.at(layer, token);
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "properties/check.h"

namespace kvfuzz {

inline constexpr int64_t kMaxProbeValues = int64_t{1} << 30;  // 4 GiB of float32

struct OpaqueReads {
  int32_t layers = 0;
  int64_t num_tokens = 0;
  std::vector<ResolvedReads> reads;  // [layers][num_tokens]; real rows only
  std::vector<Finding> findings;     // probes that do not decode, or a failing probe run
  std::vector<Finding> notes;        // masked reads of unowned slots
  int32_t probe_runs = 0;
  std::string extent_skipped;  // non-empty: no column probes ran, reads hold foreign reads only

  const ResolvedReads& at(int32_t layer, int64_t token) const {
    return reads[static_cast<size_t>(layer) * static_cast<size_t>(num_tokens) + static_cast<size_t>(token)];
  }
};

// The probes' value sets, built before the case's run so that run_backend(..., read_probes) sends
// them in the same run_many as the case's own values (one executor request, where an executor
// server's cost is per request), and their outputs once run.
class ReadProbes {
 public:
  ReadProbes(const CaseContext& ctx, const Backend& backend);
  ~ReadProbes();
  const std::vector<RunInput>& inputs() const;  // empty where no probe can decode (a large sink)
  std::vector<RunOutput>& outputs();
  void ran();  // outputs() hold the probe runs' answers

 private:
  struct Sets;
  std::unique_ptr<Sets> sets_;
  friend OpaqueReads recover_reads(const CaseContext&, const Backend&, const BackendRun&);
};

// Decodes the probes on `run`'s plan: those that ran with it (run.probes), else runs them (one
// run_many) first. `run` must have run (run.ran).
OpaqueReads recover_reads(const CaseContext& ctx, const Backend& backend, const BackendRun& run);

}  // namespace kvfuzz
