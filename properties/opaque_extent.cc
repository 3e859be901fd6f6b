#include "properties/opaque_extent.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "backends/common/backend_failure.h"
#include "backends/common/deadline.h"
#include "reference/validate.h"

namespace kvfuzz {
namespace opaque_coding {

// How the probes code owners and columns into channels.
//   owners: base-B digits of the owner id, B = C (one channel per digit), or B = 2 with one
//     channel (digit 1 coded, digit 0 not) when C = 1; a channel's count is then exact for any
//     number of reads.
//   columns: each channel carries `per_channel` columns as base-4 digits (V = 4^j), so a count
//     up to 3 per column decodes; per_channel keeps the coded sums below what the executor's
//     output precision (and fp32 accumulation over merges) holds exactly.
struct Coding {
  int32_t channels = 1;  // C = kv_heads * v_head_dim
  int32_t vd = 1;        // v_head_dim
  int32_t base = 2;      // owner digits
  int32_t owners = 0;    // batch rows, then "another request", then "no live token"
  int32_t owner_probes = 1, column_probes = 1, per_channel = 1;
  double unit_roundoff = 0.0;  // 2^-b of the executor's output dtype (b significand bits)
  std::map<int32_t, int32_t> row_of_request;

  int32_t other() const { return owners - 2; }
  int32_t none() const { return owners - 1; }
  int32_t owner(int32_t request) const {
    auto it = row_of_request.find(request);
    return it == row_of_request.end() ? other() : it->second;
  }
  int32_t digit(int32_t owner, int32_t probe) const {
    for (int32_t i = 0; i < probe; ++i) owner /= base;
    return owner % base;
  }
  // The channel a digit is coded on, or -1 (not coded).
  int32_t digit_channel(int32_t d) const { return channels >= 2 ? d : (d == 1 ? 0 : -1); }
  int32_t columns_per_probe() const { return channels * per_channel; }
};

}  // namespace opaque_coding

namespace {

using opaque_coding::Coding;

constexpr int32_t kMaxUndecodable = 4;
constexpr double kMaxDecodableSink = 8.0;  // e^8 = 2981 beside the reads; fp32 e^lse keeps them whole  // findings of
                                           // read sets that do not decode, per run

Coding make_coding(const CaseContext& ctx, int32_t output_bits) {
  const Model& m = ctx.scenario().model;
  const ForwardBatch& fb = ctx.batch();
  Coding c;
  c.vd = m.v_head_dim;
  c.channels = m.kv_heads * m.v_head_dim;
  c.base = std::max(2, c.channels);
  for (int32_t i = 0; i < fb.bs; ++i) c.row_of_request.emplace(fb.request_ids[static_cast<size_t>(i)], i);
  c.owners = fb.bs + 2;
  int64_t reach = c.base;
  while (reach < c.owners) {
    reach *= c.base;
    ++c.owner_probes;
  }
  c.per_channel = std::max(1, (std::min(output_bits, 18) - 2) / 2);
  c.unit_roundoff = std::ldexp(1.0, -output_bits);
  int32_t max_cols = 1;
  for (const LogicalRow& row : ctx.logical().rows) max_cols = std::max(max_cols, row.kv_cols);
  // Keys of other requests (foreign reads) may have larger columns; the owner probes catch them.
  c.column_probes = (max_cols + c.columns_per_probe() - 1) / c.columns_per_probe();
  return c;
}

// A code: `weight` on one channel (the V part of a head's vector: its first v_head_dim values).
struct Code {
  int32_t channel = -1;  // -1: nothing
  float weight = 1.0f;
};

void put_code(Code code, const Coding& c, int32_t head, std::span<float> out) {
  std::fill(out.begin(), out.end(), 0.0f);
  if (code.channel >= 0 && code.channel / c.vd == head) out[static_cast<size_t>(code.channel % c.vd)] = code.weight;
}

ValueFn probe_values(const Coding& c, bool mla, std::function<Code(int32_t request, int32_t column)> code_of) {
  return [&c, mla, code_of](int32_t, Tensor t, int32_t request, int32_t column, int32_t head, std::span<float> out) {
    if (t == Tensor::q || (t == Tensor::k && !mla)) {
      std::fill(out.begin(), out.end(), 0.0f);  // every logit exactly 0
      return;
    }
    put_code(code_of(request, column), c, head, out);
  };
}

Poison probe_poison(const Model& m, const Coding& c, Code channel) {
  Poison p;
  std::vector<float> row(static_cast<size_t>(m.kv_heads) * (m.mla ? m.head_dim : m.v_head_dim), 0.0f);
  const int32_t width = m.mla ? m.head_dim : m.v_head_dim;
  for (int32_t h = 0; h < m.kv_heads; ++h)
    put_code(channel, c, h, std::span<float>(row.data() + static_cast<size_t>(h) * width, static_cast<size_t>(width)));
  if (m.mla) p.k_row = row;
  else p.v_row = row;
  return p;
}

struct Counts {
  int64_t total = 0;            // m, from the LSE
  std::vector<int64_t> channel;  // [C]
  std::string problem;          // why the output does not decode
  bool unresolved = false;      // the output's precision cannot tell whole counts apart: not checked
};

// e^sink of q head h (Model::sinks), the term a sink adds to the probes' row sums (every logit 0);
// 0 without sinks.
double sink_weight(const std::vector<double>& sinks, int32_t head) {
  return sinks.empty() ? 0.0 : std::exp(sinks[static_cast<size_t>(head)]);
}

// `source[j]`: the q head whose output shows kv head j's channels (j * group unless the head
// probe found the kernel maps q heads to other kv heads).
Counts decode(const Coding& c, const RunOutput& out, int32_t layer, int64_t token, bool packed,
              const std::vector<int32_t>& source, const std::vector<double>& sinks) {
  Counts k;
  const double lse = out.lse_at(layer, token, source[0]);
  if (std::isinf(lse) && lse < 0) {
    k.channel.assign(static_cast<size_t>(c.channels), 0);
    return k;
  }
  // Every logit is 0: e^lse is the reads plus the head's sink term (sink_weight).
  const double denominator = std::exp(lse);
  const double mf = denominator - sink_weight(sinks, source[0]);
  if (!sinks.empty() && std::abs(mf) <= 0.02 + 1e-4 * denominator) {  // the sink alone: no read
    k.channel.assign(static_cast<size_t>(c.channels), 0);
    return k;
  }
  if (!std::isfinite(mf) || std::abs(mf - std::round(mf)) > 0.02 + 1e-4 * denominator) {
    std::ostringstream os;
    os << "probe LSE " << lse << " is not the log of a whole number of reads (exp = " << mf << ")";
    k.problem = os.str();
    return k;
  }
  if (mf > 1e7) {
    k.problem = "probe LSE " + std::to_string(lse) + " claims more reads than any row has keys";
    return k;
  }
  k.total = std::llround(mf);
  k.channel.assign(static_cast<size_t>(c.channels), 0);
  for (int32_t ch = 0; ch < c.channels; ++ch) {
    const int32_t head = source[static_cast<size_t>(ch / c.vd)];
    const double x = static_cast<double>(out.out_at(layer, token, head)[ch % c.vd]) *
                     (static_cast<double>(k.total) + sink_weight(sinks, head));
    // With sinks a count x comes back as x / (n + e^sink), whole counts included (x = n is not 1.0):
    // each rounding of the output (a part's, then the merge's) moves x by up to x * 2^-b. Once that
    // reaches half a count, counts cannot be told apart: the read set is unresolved, not a finding.
    const double slack =
        sinks.empty() || !std::isfinite(x) ? 0.25 : std::max(0.25, 2.0 * c.unit_roundoff * std::abs(x));
    if (slack >= 0.5) {
      k.unresolved = true;
      return k;
    }
    if (!std::isfinite(x) || x < -slack ||
        x > static_cast<double>(k.total) * (packed ? std::ldexp(1.0, 2 * c.per_channel) : 1.0) + slack ||
        std::abs(x - std::round(x)) > slack) {
      std::ostringstream os;
      os << "probe output channel " << ch << " times " << k.total << " reads is " << x << ", not a whole count";
      k.problem = os.str();
      return k;
    }
    k.channel[static_cast<size_t>(ch)] = std::llround(x);
  }
  return k;
}

std::string owner_name(const Coding& c, const ForwardBatch& fb, int32_t owner) {
  if (owner < 0 || owner >= c.owners)  // a channel no owner is coded on: the codes came back displaced
    return "probe channel " + std::to_string(owner) +
           ", which codes no owner (values displaced within or across heads)";
  if (owner == c.none()) return "slots no live token holds (free, evicted, the dummy page or past a page's end)";
  if (owner == c.other()) return "keys of requests outside the batch";
  return "keys of request " + std::to_string(fb.request_ids[static_cast<size_t>(owner)]) + " (row " + std::to_string(owner) + ")";
}

// The head probe (kv_heads > 1): Q = K = 0 and V = (j + 1, 0, ...) in kv head j for every key
// and every unowned slot, so q head h's out[0] is exactly j + 1 for the one kv head j it read,
// whatever it read of it; a mix of heads gives a fraction.
ValueFn head_values(bool mla) {
  return [mla](int32_t, Tensor t, int32_t, int32_t, int32_t head, std::span<float> out) {
    std::fill(out.begin(), out.end(), 0.0f);
    if (t == Tensor::v || (t == Tensor::k && mla)) out[0] = static_cast<float>(head + 1);
  };
}

Poison head_poison(const Model& m) {
  Poison p;
  p.v_row.assign(static_cast<size_t>(m.kv_heads) * m.v_head_dim, 0.0f);
  for (int32_t h = 0; h < m.kv_heads; ++h) p.v_row[static_cast<size_t>(h) * m.v_head_dim] = static_cast<float>(h + 1);
  return p;
}

constexpr int32_t kReadNothing = -1, kReadMixed = -2, kReadUnknown = -3;

// The kv head each q head read in the head probe's output: kReadNothing, kReadMixed, kReadUnknown
// (not finite: nothing decodes) or the head.
std::vector<int32_t> heads_read(const Model& m, const RunOutput& out, int32_t layer, int64_t token) {
  std::vector<int32_t> read(static_cast<size_t>(m.q_heads), kReadNothing);
  for (int32_t h = 0; h < m.q_heads; ++h) {
    const double lse = out.lse_at(layer, token, h);
    if (std::isinf(lse) && lse < 0) continue;
    // With a sink the output is (j + 1) n / (n + e^sink) for n reads: scaled back by e^lse / n.
    double scale = 1.0;
    if (!m.sinks.empty()) {
      const double denominator = std::exp(lse), n = denominator - sink_weight(m.sinks, h);
      if (n < 0.5) continue;  // the sink alone: no read
      scale = denominator / n;
    }
    const double x = out.out_at(layer, token, h)[0] * scale - 1.0;
    if (!std::isfinite(x) || std::isnan(lse)) {
      read[static_cast<size_t>(h)] = kReadUnknown;
      continue;
    }
    const bool whole = std::isfinite(x) && std::abs(x - std::round(x)) <= 0.02 && x > -0.5 && x < m.kv_heads - 0.5;
    read[static_cast<size_t>(h)] = whole ? static_cast<int32_t>(std::lround(x)) : kReadMixed;
  }
  return read;
}

// "q head 1 read kv head 1, q head 2 read kv head 0 (GQA maps q head h to kv head h / 2)", or
// empty when every q head read its own kv head. `source` gets, for each kv head, a q head that read
// it (its own first q head when that one did); false when some kv head was read by none.
bool head_mapping(const Model& m, const std::vector<int32_t>& read, std::string& wrong, std::vector<int32_t>& source) {
  const int32_t group = m.q_heads / m.kv_heads;
  std::ostringstream os;
  int32_t n = 0;
  for (int32_t h = 0; h < m.q_heads; ++h) {
    const int32_t got = read[static_cast<size_t>(h)];
    if (got == kReadNothing || got == h / group) continue;
    if (n++ < 3) {
      os << (n > 1 ? ", " : "") << "q head " << h << " read ";
      if (got == kReadMixed) os << "a mix of kv heads";
      else os << "kv head " << got;
    }
  }
  if (n > 3) os << " and " << n - 3 << " more q heads";
  if (n > 0) os << " (GQA maps q head h to kv head h / " << group << "): the keys of another head";
  wrong = os.str();
  bool all = true;
  for (int32_t j = 0; j < m.kv_heads; ++j) {
    auto& src = source[static_cast<size_t>(j)];
    src = j * group;
    if (read[static_cast<size_t>(src)] == j) continue;
    const auto it = std::find(read.begin(), read.end(), j);
    if (it != read.end()) src = static_cast<int32_t>(it - read.begin());
    else all = false;
  }
  return all;
}

bool finite_row(const RunOutput& out, const Model& m, int32_t layer, int64_t token) {
  for (int32_t h = 0; h < m.q_heads; ++h) {
    if (std::isnan(out.lse_at(layer, token, h))) return false;
    const float* o = out.out_at(layer, token, h);
    for (int32_t d = 0; d < m.v_head_dim; ++d)
      if (!std::isfinite(o[d])) return false;
  }
  return true;
}

}  // namespace

struct ReadProbes::Sets {
  Coding c;
  bool decodable = true;  // false: a sink drowns the counts, no probe runs at all
  bool nan_run = false, head_probe = false;
  std::string extent_skipped;
  std::vector<std::unique_ptr<KvPools>> pools;
  std::vector<std::unique_ptr<BatchTensors>> tensors;
  std::vector<RunInput> inputs;
  std::vector<RunOutput> outputs;
  bool ran = false;
};

ReadProbes::ReadProbes(const CaseContext& ctx, const Backend& backend) : sets_(std::make_unique<Sets>()) {
  const Scenario& s = ctx.scenario();
  const Model& m = s.model;
  const Prepared& p = ctx.prepared();
  const ForwardBatch& fb = p.batch;
  Sets& t = *sets_;
  Coding& c = t.c;
  c = make_coding(ctx, significand_bits(backend.rounding().out_dtype.value_or(s.values.dtype)));
  // A sink's e^sink beside a few reads: past kMaxDecodableSink the probes' whole counts drown in
  // the fp32 rounding of e^lse.
  for (const double sink : m.sinks)
    if (sink > kMaxDecodableSink) {
      t.extent_skipped = "extent not checked: an attention sink of " + std::to_string(sink) +
                         " leaves the probes' read counts below the precision of e^lse (decodable up to " +
                         std::to_string(kMaxDecodableSink) + ")";
      t.decodable = false;
      return;
    }
  const int64_t values = int64_t{c.column_probes} * written_pool_values(s, p.cache);
  if (values > kMaxProbeValues) {
    t.extent_skipped = "extent not checked: " + std::to_string(c.column_probes) + " probe sets needed (" +
                       std::to_string(values) + " pool values, over the limit of " +
                       std::to_string(kMaxProbeValues) + ")";
    c.column_probes = 0;
  }
  // The value sets: [NaN poison], [head probe], owner probes, column probes.
  std::vector<ValueFn> fns;
  std::vector<Poison> poisons;
  t.nan_run = s.values.poison;
  if (t.nan_run) {
    fns.push_back(value_fn(ctx.values()));
    poisons.push_back(nan_poison());
  }
  t.head_probe = m.kv_heads > 1 && !m.mla;  // one kv head: no head to mix up
  if (t.head_probe) {
    fns.push_back(head_values(m.mla));
    poisons.push_back(head_poison(m));
  }
  for (int32_t o = 0; o < c.owner_probes; ++o) {
    fns.push_back(probe_values(c, m.mla, [&c, o](int32_t request, int32_t) {
      return Code{c.digit_channel(c.digit(c.owner(request), o))};
    }));
    poisons.push_back(probe_poison(m, c, Code{c.digit_channel(c.digit(c.none(), o))}));
  }
  for (int32_t q = 0; q < c.column_probes; ++q) {
    fns.push_back(probe_values(c, m.mla, [&c, q](int32_t, int32_t column) {
      if (column / c.columns_per_probe() != q) return Code{};
      const int32_t at = column % c.columns_per_probe();
      return Code{at / c.per_channel, std::ldexp(1.0f, 2 * (at % c.per_channel))};
    }));
    poisons.push_back(probe_poison(m, c, Code{}));
  }
  for (size_t i = 0; i < fns.size(); ++i) {
    stop_when_time_is_up("the read probes' value sets were not built");  // a campaign's deadline (deadline.h)
    // the probes' codes are stored unscaled; the NaN run's values are the case's, scaled
    t.pools.push_back(std::make_unique<KvPools>(s, p.cache, fns[i], poisons[i], /*scaled=*/t.nan_run && i == 0));
    t.tensors.push_back(std::make_unique<BatchTensors>(s, fb, fns[i]));
  }
  for (size_t i = 0; i < fns.size(); ++i) {
    t.inputs.push_back(RunInput{s, p.cache, fb, *t.pools[i], *t.tensors[i]});
    t.outputs.emplace_back(s, fb);
  }
}

ReadProbes::~ReadProbes() = default;

const std::vector<RunInput>& ReadProbes::inputs() const { return sets_->inputs; }

std::vector<RunOutput>& ReadProbes::outputs() { return sets_->outputs; }

void ReadProbes::ran() { sets_->ran = true; }

OpaqueReads recover_reads(const CaseContext& ctx, const Backend& backend, const BackendRun& run) {
  const Scenario& s = ctx.scenario();
  const Model& m = s.model;
  const ForwardBatch& fb = ctx.prepared().batch;
  // The probes that ran with the case (run_backend's read_probes), else run here in one round trip.
  std::unique_ptr<ReadProbes> fresh;
  ReadProbes* probes = run.probes.get();
  OpaqueReads result;
  if (!probes || !probes->sets_->ran) {
    try {
      fresh = std::make_unique<ReadProbes>(ctx, backend);
    } catch (const BackendFailure& e) {  // the campaign's time was up (deadline.h): the case is dropped
      result.findings.push_back({e.property(), std::string(backend.name()), std::string("probe runs failed: ") + e.what()});
      return result;
    }
    probes = fresh.get();
  }
  const ReadProbes::Sets& t = *probes->sets_;
  const Coding& c = t.c;
  result.extent_skipped = t.extent_skipped;
  if (!t.decodable) return result;
  result.layers = static_cast<int32_t>(m.layers.size());
  result.num_tokens = fb.num_tokens();
  result.reads.resize(static_cast<size_t>(result.layers) * static_cast<size_t>(result.num_tokens));
  result.probe_runs = static_cast<int32_t>(t.inputs.size());
  if (fresh) {
    try {
      backend.run_many(*run.plan, fresh->inputs(), fresh->outputs());
    } catch (const std::exception& e) {
      const auto* failure = dynamic_cast<const BackendFailure*>(&e);
      result.findings.push_back({failure ? failure->property() : "crash", std::string(backend.name()),
                                 std::string("probe runs failed: ") + e.what()});
      result.reads.clear();
      return result;
    }
  }
  const bool nan_run = t.nan_run, head_probe = t.head_probe;
  const std::vector<RunOutput>& outputs = t.outputs;
  const size_t head_run = nan_run ? 1 : 0;
  const size_t first_owner = head_run + (head_probe ? 1 : 0),
               first_column = first_owner + static_cast<size_t>(c.owner_probes);

  int64_t masked = 0;
  std::string masked_where;
  int32_t undecodable_filed = 0;
  for (int32_t layer = 0; layer < result.layers; ++layer) {
    for (int64_t token = 0; token < result.num_tokens; ++token) {
      const int32_t row = ctx.row_of(token);
      if (row >= fb.bs) continue;
      const std::string where = "layer " + std::to_string(layer) + ", row " + std::to_string(row) + " (request " +
                                std::to_string(fb.request_ids[static_cast<size_t>(row)]) + "), query position " +
                                std::to_string(fb.positions[static_cast<size_t>(token)]);
      ResolvedReads& r = result.reads[static_cast<size_t>(layer) * static_cast<size_t>(result.num_tokens) + static_cast<size_t>(token)];
      // A read set that does not decode is unknown, not empty. Where the case's own run gave
      // NaN or infinity at this query, the probes' failure says nothing more: the oracle check
      // names it (values:non-finite). Else it is a finding, a few per run.
      const auto undecodable = [&](const std::string& mechanism, const std::string& what) {
        r.columns_known = false;
        if (!finite_row(run.out, m, layer, token) || undecodable_filed++ >= kMaxUndecodable) return;
        result.findings.push_back({"cache-extent", "", where + ": " + what, layer, row, token});
        result.findings.back().mechanism = mechanism;
      };
      std::vector<int32_t> source(static_cast<size_t>(m.kv_heads));
      for (int32_t j = 0; j < m.kv_heads; ++j) source[static_cast<size_t>(j)] = j * (m.q_heads / m.kv_heads);
      if (head_probe) {
        const std::vector<int32_t> read = heads_read(m, outputs[head_run], layer, token);
        if (std::find(read.begin(), read.end(), kReadUnknown) != read.end()) {
          undecodable("undecodable", "the read set does not decode: the head probe's output is not finite");
          continue;
        }
        std::string wrong;
        const bool every_head = head_mapping(m, read, wrong, source);
        if (!wrong.empty()) {
          r.foreign.push_back(wrong);
          r.foreign_kinds.push_back("other-head");
        }
        if (!every_head) {  // some kv head's codes reach no output: the owners and columns are unknown
          r.columns_known = false;
          continue;
        }
      }
      // Owners: every read must carry the row's own owner digit in every owner probe.
      int64_t total = -1;
      std::map<int32_t, int64_t> foreign;  // owner (exact with one owner probe) -> reads
      int64_t foreign_reads = 0, uncoded = 0;
      bool decodable = true;
      for (int32_t o = 0; o < c.owner_probes && decodable; ++o) {
        const Counts k = decode(c, outputs[first_owner + static_cast<size_t>(o)], layer, token, false, source, m.sinks);
        if (k.unresolved) {
          r.columns_known = false;
          decodable = false;
          break;
        }
        if (!k.problem.empty()) {
          undecodable("undecodable", "the read set does not decode: " + k.problem);
          decodable = false;
          break;
        }
        total = k.total;
        const int32_t own = c.digit_channel(c.digit(row, o));
        if (c.channels < 2) {  // one channel: it counts the reads whose digit is 1
          foreign_reads = std::max(foreign_reads, std::abs(k.channel[0] - (own == 0 ? k.total : 0)));
          continue;
        }
        int64_t coded = 0;
        for (int64_t x : k.channel) coded += x;
        uncoded = std::max(uncoded, k.total - coded);
        foreign_reads = std::max(foreign_reads, coded - k.channel[static_cast<size_t>(own)]);
        if (c.owner_probes == 1)
          for (int32_t ch = 0; ch < c.channels; ++ch)
            if (ch != own && k.channel[static_cast<size_t>(ch)] > 0) foreign[ch] = k.channel[static_cast<size_t>(ch)];
      }
      if (!decodable) continue;
      for (const auto& [owner, n] : foreign) {
        r.foreign.push_back(std::to_string(n) + " read(s) of " + owner_name(c, fb, owner));
        r.foreign_kinds.push_back(owner == c.none() ? "unowned-slot" : "other-request");
      }
      if ((c.owner_probes > 1 || c.channels < 2) && foreign_reads > 0) {
        r.foreign.push_back(std::to_string(foreign_reads) + " read(s) of keys owned by other requests or by no live token");
        r.foreign_kinds.push_back("other-request-or-unowned");
      }
      if (uncoded > 0) {
        r.foreign.push_back(std::to_string(uncoded) + " read(s) of slots holding no token's K/V (the dummy page as padded rows wrote it)");
        r.foreign_kinds.push_back("padding-slot");
      }
      // Columns of the row's own request.
      int64_t own_total = 0;
      bool overflow = false;
      for (int32_t q = 0; q < c.column_probes; ++q) {
        const Counts k = decode(c, outputs[first_column + static_cast<size_t>(q)], layer, token, true, source, m.sinks);
        if (k.unresolved) {
          r.columns_known = false;
          decodable = false;
          break;
        }
        if (!k.problem.empty()) {
          undecodable("undecodable", "the read set does not decode: " + k.problem);
          decodable = false;
          break;
        }
        if (k.total != total) {
          undecodable("value-dependent-reads", "the probe runs read " + std::to_string(total) + " and " +
                                                   std::to_string(k.total) +
                                                   " keys: the read set depends on the values");
          decodable = false;
          break;
        }
        for (int32_t ch = 0; ch < c.channels; ++ch) {
          int64_t sum = k.channel[static_cast<size_t>(ch)];
          for (int32_t j = 0; j < c.per_channel; ++j, sum >>= 2)
            for (int64_t n = 0; n < (sum & 3); ++n) {
              r.columns.push_back(int64_t{q} * c.columns_per_probe() + int64_t{ch} * c.per_channel + j);
              ++own_total;
            }
          overflow |= sum > 0;  // a column read 4 or more times overflowed its digit
        }
      }
      if (!decodable) continue;
      // Foreign keys share column codes with own ones; without foreign reads the counts add up.
      if (overflow) {
        r.foreign.push_back("a column read 4 or more times (the probe codes cannot say which)");
        r.foreign_kinds.push_back("read-many");
      }
      if (result.extent_skipped.empty() && foreign_reads == 0 && uncoded == 0 && !overflow && own_total != total) {
        r.foreign.push_back(std::to_string(total - own_total) + " read(s) of columns beyond every request's length");
        r.foreign_kinds.push_back("beyond-length");
      }
      std::sort(r.columns.begin(), r.columns.end());
      // NaN in unowned slots reached the output although the probes show no read of one: the
      // kernel loaded them and weighted them exactly 0 (with finite poison the answer is right).
      if (nan_run && r.foreign.empty() && finite_row(run.out, m, layer, token) && !finite_row(outputs[0], m, layer, token)) {
        if (masked++ == 0) masked_where = where;
      }
    }
  }
  if (masked > 0)
    result.notes.push_back({"masked-read", std::string(backend.name()),
                            masked_where + " and " + std::to_string(masked - 1) +
                                " more query rows: the kernel loads slots no live token holds and masks them (NaN there makes "
                                "the output NaN; finite poison leaves it right). Information, not a bug."});
  return result;
}

}  // namespace kvfuzz
