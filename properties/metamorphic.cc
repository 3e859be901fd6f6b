#include "properties/metamorphic.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>

#include "properties/tolerance.h"
#include "reference/limits.h"
#include "reference/rng.h"
#include "reference/validate.h"

namespace kvfuzz {
namespace {

// First token of each real row, by request id.
std::map<int32_t, int64_t> first_tokens(const ForwardBatch& fb) {
  std::map<int32_t, int64_t> out;
  int64_t token = 0;
  for (int32_t i = 0; i < fb.bs; ++i) {
    out[fb.request_ids[static_cast<size_t>(i)]] = token;
    token += fb.extend_lens[static_cast<size_t>(i)];
  }
  return out;
}

bool same(float a, float b, double bound) {
  if (bound == 0.0) return std::memcmp(&a, &b, sizeof a) == 0;
  if (std::isinf(a) && a == b) return true;
  return std::abs(static_cast<double>(a) - b) <= bound;
}

// Compares the outputs (and for replay the reads) of every request the variant kept.
void compare(const CaseContext& ctx, const Backend& backend, const BackendRun& base, const CaseContext& vctx,
             const BackendRun& var, const Variant& v, std::vector<Finding>& findings) {
  const auto base_first = first_tokens(ctx.batch());
  const auto var_first = first_tokens(vctx.batch());
  const Scenario& s = ctx.scenario();
  const OracleResult& oracle = ctx.oracle();
  const Scenario& vs = vctx.scenario();
  const PrecisionModel pm = precision_of(backend, s, base.out), pm_v = precision_of(backend, vs, var.out);
  const std::string property = v.name == "replay" ? "replay" : "metamorphic";
  for (int32_t row = 0; row < ctx.batch().bs; ++row) {
    const int32_t request = ctx.batch().request_ids[static_cast<size_t>(row)];
    auto it = var_first.find(request);
    if (it == var_first.end()) continue;  // dropped by the variant
    const LogicalRow& lrow = ctx.logical().rows[static_cast<size_t>(row)];
    for (int32_t layer = 0; layer < base.out.layers; ++layer) {
      for (int32_t q = 0; q < static_cast<int32_t>(lrow.queries.size()); ++q) {
        const int64_t tb = base_first.at(request) + q, tv = it->second + q;
        int64_t n = 0;
        for (const ColumnRange& cr : visible(s.model.layers[static_cast<size_t>(layer)], lrow, q)) n += cr.end - cr.begin;
        for (int32_t h = 0; h < s.model.q_heads; ++h) {
          const float lb = base.out.lse_at(layer, tb, h);
          // Each run lies within its bound of the oracle, so within their sum of each other.
          const double qk = oracle.qk_norm_at(layer, tb, h), ref_lse = oracle.lse_at(layer, tb, h);
          const Tolerance tol = tolerance(s, pm, n, qk, ref_lse), tol_v = tolerance(vs, pm_v, n, qk, ref_lse);
          const std::span<const double> ref = oracle.out_at(layer, tb, h), ref_abs = oracle.abs_out_at(layer, tb, h);
          const double lse_bound = v.bitwise ? 0.0 : tol.lse + tol_v.lse;
          double out_bound = 0.0;
          const float* ob = base.out.out_at(layer, tb, h);
          const float* ov = var.out.out_at(layer, tv, h);
          int32_t bad = -1;
          for (int32_t d = 0; d < s.model.v_head_dim && bad < 0; ++d) {
            const auto i = static_cast<size_t>(d);
            out_bound = v.bitwise ? 0.0 : tol.out(ref_abs[i], ref[i]) + tol_v.out(ref_abs[i], ref[i]);
            if (!same(ob[d], ov[d], out_bound)) bad = d;
          }
          const bool lse_bad = !same(lb, var.out.lse_at(layer, tv, h), lse_bound);
          const bool reads_bad = v.name == "replay" && h == 0 &&
                                 resolve_reads(ctx, base, layer, tb).columns != resolve_reads(vctx, var, layer, tv).columns;
          if (bad < 0 && !lse_bad && !reads_bad) continue;
          std::ostringstream os;
          os.precision(9);
          os << v.name << ": request " << request << ", layer " << layer << ", query position "
             << lrow.queries[static_cast<size_t>(q)].position << ", q head " << h << " changed";
          if (bad >= 0) os << ": out[" << bad << "] " << ob[bad] << " -> " << ov[bad];
          if (lse_bad) os << ": lse " << lb << " -> " << var.out.lse_at(layer, tv, h);
          if (reads_bad) os << ": it read other keys under replay than eagerly";
          os << (v.bitwise ? " (must be bitwise equal)" : " (bound " + std::to_string(out_bound) + ")");
          findings.push_back({property, "", os.str(), layer, row, tb, v.name});
          findings.back().mechanism = std::string("changed:") + (bad >= 0 ? "out" : "") +
                                      (bad >= 0 && (lse_bad || reads_bad) ? "+" : "") + (lse_bad ? "lse" : "") +
                                      (lse_bad && reads_bad ? "+" : "") + (reads_bad ? "reads" : "");
          return;  // one per variant is enough to act on
        }
      }
    }
  }
}

}  // namespace

std::vector<Variant> metamorphic_variants(const Scenario& s, uint64_t seed, VariantTallies* tallies) {
  Rng rng(seed);
  std::vector<Variant> out;
  auto add = [&](std::string name, Scenario v, bool bitwise) {
    if (v == s) return;  // nothing to vary (not a dropped variant)
    if (!is_valid(v)) {
      if (tallies != nullptr) ++(*tallies)[name].invalid;
      return;
    }
    out.push_back({std::move(name), std::move(v), bitwise});
  };
  const size_t n = s.batch.entries.size();
  if (n >= 2) {
    Scenario v = s;
    for (size_t i = n; i > 1; --i) std::swap(v.batch.entries[i - 1], v.batch.entries[rng.below(i)]);
    if (v.batch.entries == s.batch.entries) std::swap(v.batch.entries[0], v.batch.entries[1]);
    add("batch-order", std::move(v), true);

    Scenario w = s;
    const size_t keep = 1 + rng.below(n - 1);
    for (size_t i = n; i > 1; --i) std::swap(w.batch.entries[i - 1], w.batch.entries[rng.below(i)]);
    w.batch.entries.resize(keep);
    // Adaptive Triton splits depend on the other requests' lengths: bitwise only when static.
    add("unrelated", std::move(w), s.batch.device_sms == 0);
  }
  if (n >= 1) {
    Scenario v = s;
    v.batch.graph_bs = s.batch.graph_bs > 0 ? 0 : static_cast<int32_t>(std::min<uint64_t>(limits::kMaxBatch, n + 1 + rng.below(3)));
    add("replay", std::move(v), false);  // a captured graph may run another kernel (one paged call)

    Scenario k = s;
    k.batch.kv_splits = s.batch.kv_splits == 1 ? static_cast<int32_t>(rng.range(2, 8)) : 1;
    if (rng.chance(1, 2)) k.batch.device_sms = s.batch.device_sms > 0 ? 0 : 132;  // static <-> adaptive
    add("kv-splits", std::move(k), false);
  }
  {
    Scenario v = s;
    int32_t id = 0;
    for (const Op& op : s.history) id = std::max(id, op.request + 1);
    for (const BatchEntry& e : s.batch.entries) id = std::max(id, e.request + 1);
    const auto len = static_cast<int32_t>(rng.range(1, 3 * s.cache.page_size));
    v.history.insert(v.history.begin(), {{OpKind::admit, id, 0, {}, {}}, {OpKind::extend, id, len, {}, {}}, {OpKind::free, id, 0, {}, {}}});
    add("history", std::move(v), true);
  }
  if (s.cache.page_size > 1) {
    Scenario v = s;
    const int32_t ps = s.cache.page_size;
    v.cache.page_size = 1;
    v.cache.full_pages = (s.cache.full_pages + 1) * ps - 1;
    v.cache.swa_pages = s.cache.swa_pages > 0 ? (s.cache.swa_pages + 1) * ps - 1 : 0;
    add("page-size", std::move(v), false);
  }
  return out;
}

std::vector<Finding> check_metamorphic(const CaseContext& ctx, const BackendRun& base, const Backend& backend,
                                       const std::vector<std::string>& faults, uint64_t seed, VariantTallies* tallies) {
  std::vector<Finding> findings;
  if (!base.ran) return findings;
  for (const Variant& v : metamorphic_variants(ctx.scenario(), seed, tallies)) {
    const CaseContext vctx(v.scenario);
    BackendRun var = run_backend(vctx, backend, faults);
    if (tallies != nullptr) ++(var.support.ok ? (*tallies)[v.name].run : (*tallies)[v.name].unsupported);
    for (Finding& f : var.findings) {
      f.message = v.name + " variant: " + f.message;
      f.variant = v.name;
      findings.push_back(std::move(f));
    }
    // Bitwise holds for executors that reduce keys in logical order, as kvfuzz's do; a kernel
    // outside kvfuzz may follow the layout (pages, tiles), so it is compared within tolerance.
    // A plan that merges where the batch says so (a cascade over its common prefix) rounds with it.
    Variant compared = v;
    compared.bitwise = v.bitwise && backend.records_reads() && !(base.plan && base.plan->merges_by_batch()) &&
                       !(var.plan && var.plan->merges_by_batch());
    if (var.ran) compare(ctx, backend, base, vctx, var, compared, findings);
  }
  for (Finding& f : findings) {
    f.backend = std::string(backend.name());
    f.dcp_world = base.plan ? base.plan->dcp_world() : 1;  // the planner's, as in its base run
  }
  return findings;
}

}  // namespace kvfuzz
