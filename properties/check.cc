#include "properties/check.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "backends/common/backend_failure.h"
#include "backends/common/deadline.h"
#include "backends/common/harness_error.h"
#include "backends/common/violation.h"
#include "backends/contract/npy.h"
#include "properties/fingerprint.h"
#include "properties/opaque_extent.h"
#include "properties/read_diff.h"
#include "properties/scale_fit.h"
#include "properties/tolerance.h"
#include "reference/input_out_of_range.h"
#include "reference/validate.h"

namespace kvfuzz {
namespace {

constexpr size_t kMaxReports = 4;  // per mechanism, property and layer kind: enough to see the pattern

// Reports per (property, layer kind, mechanism) of one run: a second mechanism is never hidden
// behind the first one's reports.
class ReportBudget {
 public:
  bool take(const CaseContext& ctx, const std::string& property, int32_t layer, const std::string& mechanism) {
    const std::string kind = layer >= 0 ? to_string(ctx.scenario().model.layers[static_cast<size_t>(layer)].kind) : "";
    return used_[property + "/" + kind + "/" + mechanism]++ < kMaxReports;
  }

 private:
  std::map<std::string, size_t> used_;
};

std::string describe_row(const CaseContext& ctx, int32_t layer, int32_t row, int64_t token) {
  const ForwardBatch& fb = ctx.batch();
  std::ostringstream os;
  os << "layer " << layer << " (" << to_string(ctx.scenario().model.layers[static_cast<size_t>(layer)].kind) << ")";
  if (row >= 0) {
    os << ", row " << row;
    if (row < fb.bs) os << " (request " << fb.request_ids[static_cast<size_t>(row)] << ")";
    else os << " (padded)";
  }
  if (token >= 0 && row >= 0 && row < fb.bs)
    os << ", query position " << fb.positions[static_cast<size_t>(token)] << " (column "
       << fb.token_columns[static_cast<size_t>(token)] << ")";
  return os.str();
}

Finding violation_finding(const CaseContext& ctx, const Backend& b, const Violation& v) {
  Finding f{"in-bounds", std::string(b.name()), v.what(), v.where().layer, v.where().row, v.where().token};
  const std::string what = f.message.substr(std::min(f.message.size(), v.buffer().size() + 2));
  f.mechanism = bounds_mechanism(v.buffer(), what);
  if (f.layer >= 0) f.message = describe_row(ctx, f.layer, f.row, f.token) + ": " + f.message;
  return f;
}

// What a recorded read holds: the logical column of the row's request, or why it is foreign.
struct Resolved {
  int32_t column = -1;
  std::string foreign;  // empty when the read is a key of the row's own request
  std::string kind;     // the foreign read's kind (read_diff.h): other-row, outside-pool, ...
};

Resolved resolve(const CaseContext& ctx, const Read& r, int32_t row) {
  const ForwardBatch& fb = ctx.batch();
  const CacheState& cache = ctx.prepared().cache;
  const int32_t request = fb.request_ids[static_cast<size_t>(row)];
  if (r.source == ReadSource::batch) {
    const int32_t other = ctx.row_of(r.index);
    if (other != row) return {-1, "batch token " + std::to_string(r.index) + " of row " + std::to_string(other), "other-row"};
    return {fb.token_columns[static_cast<size_t>(r.index)], {}, {}};
  }
  const auto& content = r.source == ReadSource::swa ? cache.swa_content : cache.full_content;
  const std::string where = std::string(r.source == ReadSource::swa ? "SWA" : "full") + " slot " + std::to_string(r.index);
  if (r.index < 0 || r.index >= static_cast<int64_t>(content.size())) return {-1, where + " (outside the pool)", "outside-pool"};
  const SlotContent& c = content[static_cast<size_t>(r.index)];
  if (!c.live()) return {-1, where + " (no live token: free, the dummy page, or past the end of a page)", "unowned-slot"};
  // A shared prefix slot names one holder; the row's request holds the same K/V there when the
  // two columns have one owner (shared_prefix.h).
  if (c.request != request && ctx.values().owner(c.request, c.column) != ctx.values().owner(request, c.column))
    return {-1, where + " (request " + std::to_string(c.request) + ", column " + std::to_string(c.column) + ")", "other-request"};
  if (!c.written || c.column < 0) return {-1, where + " (allocated to this request but not written yet)", "unwritten-slot"};
  return {c.column, {}, {}};
}

}  // namespace

std::string format_ranges(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  std::ostringstream os;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (i) os << ", ";
    os << v[i];
    if (j > i) os << ".." << v[j];
    i = j + 1;
  }
  return v.empty() ? "(none)" : os.str();
}

namespace {
constexpr int64_t kJoinedProbeValues = int64_t{1} << 26;  // the case's written pool values, for its probes to join its request
}  // namespace

BackendRun run_backend(const CaseContext& ctx, const Backend& backend, const std::vector<std::string>& faults,
                       bool lenient, bool read_probes) {
  BackendRun run;
  run.support = runnable(backend, ctx.scenario());
  if (!run.support.ok) return run;
  const Scenario& s = ctx.scenario();
  const Prepared& p = ctx.prepared();
  // A kernel may load an unowned slot and mask it with weight exactly 0; an opaque executor gets
  // finite poison there, so only a used read changes its answer (opaque_extent.h).
  const Poison poison = !s.values.poison ? Poison{} : backend.records_reads() ? nan_poison() : finite_poison(s.values.dtype);
  KvPools pools(s, p.cache, value_fn(ctx.values()), poison);
  run.out = RunOutput(s, p.batch);
  try {
    stop_when_time_is_up("the backend's check was not started");  // a campaign's deadline (deadline.h)
    run.plan = backend.plan({s, p.cache, p.batch, faults});
    run.plan->check_guards();
    MetadataChecker checker(s, p.cache, p.batch, [&ctx](int32_t layer, int32_t row, int32_t column) {
      return ctx.visible_to_row(layer, row, column);
    });
    run.plan->check_metadata(checker);
    for (const auto& item : checker.findings()) {
      run.findings.push_back({item.property, std::string(backend.name()), item.message, item.layer});
      run.findings.back().mechanism = item.mechanism;
    }
    for (const PlanRunDisagreement& d : run.plan->plan_run) {  // the engine's plan step against its run step
      run.findings.push_back({"plan-run", std::string(backend.name()), d.message, d.layer});
      run.findings.back().mechanism = "plan-run:" + d.argument;
    }
    std::vector<std::string> skipped;
    const RunInput in{s, p.cache, p.batch, pools, ctx.tensors(), lenient ? &skipped : nullptr};
    // KVFUZZ_PROBES_APART=1: the probes in a request of their own, as before (an A/B of the cost).
    // A large case's too (the long profile's pools, up to GBs a set): its pools and its probes'
    // would be held at once, and one request more is nothing beside its size.
    static const bool apart = std::getenv("KVFUZZ_PROBES_APART") != nullptr;
    if (read_probes && !apart && !backend.records_reads() && written_pool_values(s, p.cache) <= kJoinedProbeValues)
      run.probes = std::make_shared<ReadProbes>(ctx, backend);
    if (run.probes && !run.probes->inputs().empty()) {  // the case's values and the probes' in one request
      std::vector<RunInput> inputs{in};
      for (const RunInput& probe : run.probes->inputs()) inputs.push_back(probe);
      std::vector<RunOutput> outputs;
      outputs.emplace_back(s, p.batch);
      for (RunOutput& o : run.probes->outputs()) outputs.push_back(std::move(o));
      backend.run_many(*run.plan, inputs, outputs);
      run.out = std::move(outputs[0]);
      for (size_t i = 1; i < outputs.size(); ++i) run.probes->outputs()[i - 1] = std::move(outputs[i]);
      run.probes->ran();
    } else {
      backend.run(*run.plan, in, run.out);
    }
    for (std::string& m : skipped) run.findings.push_back({"in-bounds", std::string(backend.name()), std::move(m)});
    run.plan->check_guards();
    run.ran = true;
  } catch (const Violation& v) {
    run.findings.push_back(violation_finding(ctx, backend, v));
  } catch (const InputOutOfRange& e) {  // the backend read one of its inputs past the end
    run.findings.push_back({"in-bounds", std::string(backend.name()), "read of " + e.input() + ": " + e.what()});
    run.findings.back().mechanism = e.input() + ":read-outside";
  } catch (const HarnessError&) {
    throw;  // kvfuzz's own mistake: not the backend's finding
  } catch (const BackendUnsupported& e) {  // known only once the external backend saw the case
    run.support = Support::no(e.what());
    run.findings.clear();
    run.plan.reset();
  } catch (const BackendFailure& e) {  // an external backend crashed, hung or broke the contract
    run.findings.push_back({e.property(), std::string(backend.name()), e.what()});
  } catch (const ContractError& e) {  // an external planner's metadata that does not parse
    run.findings.push_back({"contract", std::string(backend.name()), e.what()});
  } catch (const std::exception& e) {  // anything else the backend threw: it crashed
    run.findings.push_back({"crash", std::string(backend.name()), std::string("the backend threw: ") + e.what()});
  }
  return run;
}

std::vector<int64_t> expected_columns(const CaseContext& ctx, int32_t layer, int64_t token) {
  const LogicalRow& lrow = ctx.logical().rows[static_cast<size_t>(ctx.row_of(token))];
  std::vector<int64_t> expected;
  for (const ColumnRange& cr : visible(ctx.scenario().model.layers[static_cast<size_t>(layer)], lrow, ctx.query_in_row(token)))
    for (int32_t c = cr.begin; c < cr.end; ++c) expected.push_back(c);
  return expected;
}

ResolvedReads resolve_reads(const CaseContext& ctx, const BackendRun& run, int32_t layer, int64_t token) {
  ResolvedReads out;
  for (const Read& r : run.out.reads.reads(layer, token)) {
    Resolved res = resolve(ctx, r, ctx.row_of(token));
    if (res.foreign.empty()) {
      out.columns.push_back(res.column);
    } else {
      out.foreign.push_back(std::move(res.foreign));
      out.foreign_kinds.push_back(std::move(res.kind));
    }
  }
  std::sort(out.columns.begin(), out.columns.end());
  return out;
}

void check_extent(const CaseContext& ctx, const BackendRun& run, std::vector<Finding>& findings, const ReadsOf& reads_of,
                  ReadMechanisms* mechanisms) {
  const ForwardBatch& fb = ctx.batch();
  ReportBudget budget;
  for (int32_t layer = 0; layer < run.out.layers; ++layer) {
    for (int64_t token = 0; token < fb.num_tokens(); ++token) {
      const int32_t row = ctx.row_of(token);
      const std::vector<Read>& reads = run.out.reads.reads(layer, token);
      if (row >= fb.bs && reads_of) continue;  // an opaque executor's padded rows are not decoded
      if (row >= fb.bs) {  // a padded row may only touch the dummy page
        for (const Read& r : reads) {
          const bool dummy = r.source == ReadSource::batch ? ctx.row_of(r.index) >= fb.bs : r.index < fb.page_size;
          if (!dummy && budget.take(ctx, "in-bounds", layer, "padded-row-read")) {
            findings.push_back({"in-bounds", "", describe_row(ctx, layer, row, token) + ": a padded row reads " +
                                                     (r.source == ReadSource::batch ? "batch token " : "slot ") +
                                                     std::to_string(r.index) + " outside the dummy page 0",
                                layer, row, token});
            findings.back().mechanism = "padded-row-read";
          }
        }
        continue;
      }
      const std::vector<int64_t> expected = expected_columns(ctx, layer, token);
      const ResolvedReads resolved = reads_of ? reads_of(layer, token) : resolve_reads(ctx, run, layer, token);
      const std::vector<int64_t>& got = resolved.columns;
      const std::vector<std::string>& foreign = resolved.foreign;
      std::vector<int64_t> missing, extra, twice;
      if (resolved.columns_known) {
        std::set_difference(expected.begin(), expected.end(), got.begin(), got.end(), std::back_inserter(missing));
        for (size_t i = 0; i < got.size(); ++i) {
          if (i > 0 && got[i] == got[i - 1]) twice.push_back(got[i]);
          else if (!std::binary_search(expected.begin(), expected.end(), got[i])) extra.push_back(got[i]);
        }
      }
      if (missing.empty() && extra.empty() && twice.empty() && foreign.empty()) continue;
      const std::string property = foreign.empty() ? "cache-extent" : "in-bounds";
      const std::string mechanism = read_diff_mechanism(expected, got, resolved.foreign_kinds);
      if (mechanisms != nullptr) (*mechanisms)[{layer, token}] = mechanism;
      if (!budget.take(ctx, property, layer, mechanism)) continue;
      std::ostringstream os;
      os << describe_row(ctx, layer, row, token) << ":\n  expected keys " << format_ranges(expected)
         << "\n  read keys     " << (resolved.columns_known ? format_ranges(got) : "(not recovered)");
      if (!missing.empty()) os << "\n  missing       " << format_ranges(missing);
      if (!extra.empty()) os << "\n  extra         " << format_ranges(extra);
      if (!twice.empty()) os << "\n  read twice    " << format_ranges(twice);
      for (size_t i = 0; i < foreign.size() && i < 3; ++i) os << "\n  foreign read  " << foreign[i];
      if (foreign.size() > 3) os << "\n  ... and " << foreign.size() - 3 << " more foreign reads";
      findings.push_back({property, "", os.str(), layer, row, token});
      findings.back().mechanism = mechanism;
    }
  }
}

namespace {

// With the column probes skipped: the foreign reads the owner probes found (in-bounds).
void check_foreign(const CaseContext& ctx, const OpaqueReads& reads, std::vector<Finding>& findings) {
  ReportBudget budget;
  for (int32_t layer = 0; layer < reads.layers; ++layer) {
    for (int64_t token = 0; token < reads.num_tokens; ++token) {
      const int32_t row = ctx.row_of(token);
      const std::vector<std::string>& foreign = reads.at(layer, token).foreign;
      if (row >= ctx.batch().bs || foreign.empty()) continue;
      const std::string mechanism = read_diff_mechanism({}, {}, reads.at(layer, token).foreign_kinds);
      if (!budget.take(ctx, "in-bounds", layer, mechanism)) continue;
      std::ostringstream os;
      os << describe_row(ctx, layer, row, token) << ":";
      for (size_t i = 0; i < foreign.size() && i < 3; ++i) os << "\n  foreign read  " << foreign[i];
      findings.push_back({"in-bounds", "", os.str(), layer, row, token});
      findings.back().mechanism = mechanism;
    }
  }
}

// What an oracle disagreement with a right read set looks like, decided per run so that one bug
// gives one name: NaN or infinity where the oracle is finite (per query); an LSE in base 2 (log2(e)
// times the natural one) with every output right; a softmax scale other than the case's that
// explains every sampled disagreement (scale_fit.h); or else by how far the run's worst error lies
// past its bound: within 8 times it (marginal: rounding beyond the declared precision) or beyond
// (gross).
struct RunValues {
  bool lse_base2 = true;  // every disagreement: LSE in base 2, output right
  std::optional<double> scale;
  double worst_ratio = 0.0;
};

std::string values_mechanism(bool non_finite, const RunValues& v) {
  if (non_finite) return "values:non-finite";
  if (v.lse_base2) return "values:lse-base2";
  if (v.scale) return "values:scale";
  return v.worst_ratio <= 8.0 ? "values:marginal" : "values:gross";
}

constexpr size_t kScaleSamples = 8;  // disagreements the scale fit checks, spread over the run

}  // namespace

void check_agreement(const CaseContext& ctx, const Backend& backend, const BackendRun& run,
                     std::vector<Finding>& findings, std::vector<Finding>* notes, const ReadMechanisms* reads) {
  int64_t unbounded = 0, max_keys = 0;
  const ForwardBatch& fb = ctx.batch();
  const Scenario& s = ctx.scenario();
  const OracleResult& oracle = ctx.oracle();
  const PrecisionModel pm = precision_of(backend, s, run.out);
  struct Disagreement {
    Finding finding;
    bool non_finite, lse_base2;
    ScaleSample sample;
  };
  std::vector<Disagreement> found;  // named once the run's worst error is known
  RunValues run_values;
  for (int32_t layer = 0; layer < run.out.layers; ++layer) {
    const Layer& l = s.model.layers[static_cast<size_t>(layer)];
    int64_t token = 0;
    for (int32_t row = 0; row < fb.bs; ++row) {
      const LogicalRow& lrow = ctx.logical().rows[static_cast<size_t>(row)];
      for (int32_t q = 0; q < static_cast<int32_t>(lrow.queries.size()); ++q, ++token) {
        int64_t n = 0;
        for (const ColumnRange& cr : visible(l, lrow, q)) n += cr.end - cr.begin;
        for (int32_t h = 0; h < s.model.q_heads; ++h) {
          const double ref_lse = oracle.lse_at(layer, token, h);
          const Tolerance tol = tolerance(s, pm, n, oracle.qk_norm_at(layer, token, h), ref_lse);
          if (!tol.bounded()) {
            ++unbounded;
            max_keys = std::max(max_keys, n);
            continue;
          }
          const std::span<const double> ref = oracle.out_at(layer, token, h);
          const std::span<const double> ref_abs = oracle.abs_out_at(layer, token, h);
          const float* got = run.out.out_at(layer, token, h);
          double worst = 0.0, worst_bound = 0.0, worst_ratio = 0.0;
          int32_t worst_d = -1;
          bool non_finite = false;
          for (int32_t d = 0; d < s.model.v_head_dim; ++d) {
            const auto i = static_cast<size_t>(d);
            const double err = std::abs(static_cast<double>(got[d]) - ref[i]);
            const double bound = tol.out(ref_abs[i], ref[i]);
            non_finite |= !std::isfinite(got[d]) && std::isfinite(ref[i]);
            if (!(err <= bound)) worst_ratio = std::max(worst_ratio, bound > 0 ? err / bound : HUGE_VAL);
            if (!(err <= bound) && (worst_d < 0 || !(err - bound <= worst - worst_bound))) {
              worst = err;
              worst_bound = bound;
              worst_d = d;
            }
          }
          const double got_lse = run.out.lse_at(layer, token, h);
          const double lse_err = std::abs(got_lse - ref_lse);
          const bool lse_bad = !(lse_err <= tol.lse) && !(std::isinf(ref_lse) && got_lse == ref_lse);
          if (worst_d < 0 && !lse_bad) continue;
          if (lse_bad) worst_ratio = std::max(worst_ratio, tol.lse > 0 ? lse_err / tol.lse : HUGE_VAL);
          non_finite |= !std::isfinite(got_lse) && std::isfinite(ref_lse);
          constexpr double kLog2e = 1.4426950408889634;
          // Base 2 within the LSE's bound (and the float rounding of the product), no looser: a
          // small LSE is near log2(e) times itself whatever went wrong.
          const bool lse_base2 =
              worst_d < 0 && lse_bad && std::isfinite(ref_lse) &&
              std::abs(got_lse - ref_lse * kLog2e) <= (tol.lse + 0x1p-22 * std::abs(ref_lse)) * kLog2e;
          std::ostringstream os;
          os.precision(9);
          os << describe_row(ctx, layer, row, token) << ", q head " << h << " (" << n << " visible keys):";
          if (worst_d >= 0)
            os << "\n  out[" << worst_d << "] = " << got[worst_d] << ", oracle " << ref[static_cast<size_t>(worst_d)]
               << " (error " << worst << ", bound " << worst_bound << ")";
          if (lse_bad) os << "\n  lse = " << got_lse << ", oracle " << ref_lse << " (bound " << tol.lse << ")";
          // A query that read the wrong keys: its values follow from them, and so does the name.
          const auto wrong_reads = reads != nullptr ? reads->find({layer, token}) : ReadMechanisms::const_iterator{};
          const bool by_reads = reads != nullptr && wrong_reads != reads->end();
          if (!by_reads && !non_finite) {
            run_values.worst_ratio = std::max(run_values.worst_ratio, worst_ratio);
            run_values.lse_base2 &= lse_base2;
          }
          ScaleSample sample{layer, token, h, std::vector<double>(got, got + s.model.v_head_dim), got_lse};
          found.push_back({{"oracle", "", os.str(), layer, row, token}, non_finite, lse_base2, std::move(sample)});
          if (by_reads) found.back().finding.mechanism = "reads:" + wrong_reads->second;
        }
      }
    }
  }
  // The value disagreements (right reads, finite): all base 2, else maybe one wrong scale.
  std::vector<const Disagreement*> by_values;
  for (const Disagreement& d : found)
    if (d.finding.mechanism.empty() && !d.non_finite) by_values.push_back(&d);
  run_values.lse_base2 &= !by_values.empty();
  if (!run_values.lse_base2 && !by_values.empty()) {
    std::vector<ScaleSample> samples;
    const size_t step = std::max<size_t>(1, by_values.size() / kScaleSamples);
    for (size_t i = 0; i < by_values.size() && samples.size() < kScaleSamples; i += step)
      samples.push_back(by_values[i]->sample);
    run_values.scale = fitted_scale(ctx, pm, samples);
  }
  ReportBudget budget;
  std::set<std::pair<int32_t, int64_t>> non_finite_queries;  // one finding per query, not per head
  for (Disagreement& d : found) {
    if (d.finding.mechanism.empty()) d.finding.mechanism = values_mechanism(d.non_finite, run_values);
    if (d.finding.mechanism == "values:non-finite" &&
        !non_finite_queries.insert({d.finding.layer, d.finding.token}).second)
      continue;
    if (d.finding.mechanism == "values:scale") {
      std::ostringstream os;
      os.precision(6);
      os << "\n  every sampled disagreement is softmax at scale " << *run_values.scale << ", not the case's sm_scale "
         << s.model.sm_scale << " (" << *run_values.scale / s.model.sm_scale << " times it)";
      d.finding.message += os.str();
    }
    if (budget.take(ctx, "oracle", d.finding.layer, d.finding.mechanism)) findings.push_back(std::move(d.finding));
  }
  if (unbounded > 0 && notes)
    notes->push_back({"oracle-not-bounded", std::string(backend.name()),
                      "oracle agreement not checked on " + std::to_string(unbounded) +
                          " (query, head) pairs of up to " + std::to_string(max_keys) +
                          " keys: the declared precision (tile_keys " + std::to_string(pm.tile_keys) +
                          ") gives no worst-case bound there; declare the kernel's tile size"});
}

CheckResult check_run(const CaseContext& ctx, const Backend& backend, const BackendRun& run) {
  CheckResult result{run.support, run.findings, {}};
  if (!run.support.ok) return result;
  ReadMechanisms wrong_reads;  // queries whose read set is wrong, for the oracle's fingerprints
  if (run.ran && backend.records_reads()) {
    check_extent(ctx, run, result.findings, nullptr, &wrong_reads);
    check_agreement(ctx, backend, run, result.findings, &result.notes, &wrong_reads);
  } else if (run.ran) {
    OpaqueReads reads = recover_reads(ctx, backend, run);
    for (Finding& f : reads.findings) result.findings.push_back(std::move(f));
    for (Finding& f : reads.notes) result.notes.push_back(std::move(f));
    if (!reads.extent_skipped.empty()) {
      result.notes.push_back({"extent-not-checked", std::string(backend.name()), reads.extent_skipped});
      if (!reads.reads.empty()) check_foreign(ctx, reads, result.findings);
    } else if (!reads.reads.empty()) {
      check_extent(ctx, run, result.findings, [&reads](int32_t layer, int64_t token) { return reads.at(layer, token); },
                   &wrong_reads);
    }
    check_agreement(ctx, backend, run, result.findings, &result.notes, &wrong_reads);
  }
  for (Finding& f : result.findings) {
    f.backend = std::string(backend.name());
    f.dcp_world = run.plan ? run.plan->dcp_world() : 1;
  }
  return result;
}

CheckResult check_case(const CaseContext& ctx, const Backend& backend, const std::vector<std::string>& faults) {
  return check_run(ctx, backend, run_backend(ctx, backend, faults, /*lenient=*/false, /*read_probes=*/true));
}

}  // namespace kvfuzz
