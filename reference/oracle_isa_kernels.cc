// One ISA's oracle kernels (oracle_dispatch.h): attention of a work unit, the softmax's e^x, and
// the bench's peak loops.
//
// Where it sits: under attend (oracle_kernel.cc) and the oracle bench, through oracle_kernels().
// reference/CMakeLists.txt compiles this file once per ISA (oracle_target.h), with -ffp-contract=off
// so every ISA runs the operations written here and no others.
//
// attend_unit walks the unit's key hull in blocks of kKeyBlock keys (a streamed row's K/V generated
// into the thread's scratch, block by block) with an online softmax in double: S = Q K^T, scale,
// softcap, mask to each query's visible ranges, P = e^(S - running max) with rescaling of the
// running sum and output, O += P V (oracle_tiles.h); alongside, the same average of |V| and the
// largest key norm (what properties/tolerance.h bounds errors with). A model's attention sinks
// join each row's softmax once, at the end (fold_sink).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>

#include "reference/oracle_dispatch.h"
#include "reference/oracle_exp.h"
#include "reference/oracle_kernel.h"
#include "reference/oracle_scratch.h"
#include "reference/oracle_target.h"
#include "reference/oracle_tiles.h"

KVFUZZ_ORACLE_BEGIN

namespace kvfuzz::KVFUZZ_ORACLE_NS {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Sets s[j] = -inf for j in [0, nbp) unless column kb + j < kb + nb lies in one of `ranges`.
void mask_row(double* s, int nbp, int32_t kb, int nb, std::span<const ColumnRange> ranges) {
  const int32_t ke = kb + nb;
  int cursor = 0;
  for (const ColumnRange& r : ranges) {
    if (r.end <= kb) continue;
    if (r.begin >= ke) break;
    const int b = std::max(r.begin, kb) - kb;
    std::fill(s + cursor, s + std::max(cursor, b), kNegInf);
    cursor = std::min(r.end, ke) - kb;
  }
  std::fill(s + cursor, s + nbp, kNegInf);
}

// One online-softmax step of one row over a key block: turns its raw dot products s[0 .. nbp)
// into probabilities e^(logit - new max), and rescales the row's running sum and output.
// nbp: a multiple of kOracleLanes.
void softmax_row(double* s, int nbp, int32_t kb, int nb, std::span<const ColumnRange> ranges, const OracleShape& sh,
                 double& max, double& sum, double* o, double* oa) {
  using namespace simd;
  for (int j = 0; j < nbp; j += kLanes) store(s + j, load(s + j) * splat(sh.sm_scale));
  if (sh.softcap > 0.0)
    for (int j = 0; j < nb; ++j) s[j] = sh.softcap * std::tanh(s[j] / sh.softcap);
  mask_row(s, nbp, kb, nb, ranges);
  vd vmax = splat(kNegInf);
  for (int j = 0; j < nbp; j += kLanes) vmax = simd::max(vmax, load(s + j));
  const double new_max = std::max(max, hmax(vmax));
  const double shift = new_max == kNegInf ? 0.0 : new_max;  // nothing seen yet: all e^-inf = 0
  vw vsum = wide_splat(0.0);                                // lane l sums s[j] for j = l mod kOracleLanes
  for (int j = 0; j < nbp; j += kOracleLanes)
    for (int h = 0; h < kParts; ++h) {
      const vd p = exp_nonpositive(load(s + j + h * kLanes) - splat(shift));
      store(s + j + h * kLanes, p);
      vsum.part[h] = vsum.part[h] + p;
    }
  const double alpha = exp_nonpositive(max - shift);
  sum = std::fma(sum, alpha, wide_hsum(vsum));
  max = new_max;
  if (alpha != 1.0)
    for (int c = 0; c < sh.dvp; c += kLanes) {
      store(o + c, load(o + c) * splat(alpha));
      store(oa + c, load(oa + c) * splat(alpha));
    }
}

// The sink of a q head (Model::sinks) joins the row's softmax once, after its last key block: a
// term e^(sink - max) in the denominator and none in the numerator. The running max, sum and
// output move to max(max, sink); a row that saw no key gets sum 1 at max = sink (output 0,
// LSE = sink).
void fold_sink(double sink, double& max, double& sum, double* o, double* oa, int dvp) {
  const double new_max = std::max(max, sink);
  const double alpha = sum > 0.0 ? std::exp(max - new_max) : 0.0;
  sum = sum * alpha + std::exp(sink - new_max);
  max = new_max;
  for (int c = 0; c < dvp; ++c) {
    o[c] *= alpha;
    oa[c] *= alpha;
  }
}

void attend_unit(const WorkUnit& u, const RowPlan& rp, size_t r, const Materialised& m, int64_t query_base,
                 const LayerOut& out_layer, OracleScratch& w) {
  const OracleShape& sh = m.shape;
  const int g = sh.group;
  const int rows = (u.q_end - u.q_begin) * g;
  const bool packed = rows >= kPackMinRows;
  for (int i = 0; i < rows; ++i) w.rows[static_cast<size_t>(i)] = m.q_at(r, u.q_begin + i / g, u.kv_head * g + i % g);
  if (packed) tiles::pack_q_panels(w.rows.data(), rows, sh.dp, w.q.data());
  else tiles::pack_q_rows(w.rows.data(), rows, sh.dp, w.q.data());
  std::fill(w.max.begin(), w.max.begin() + rows, kNegInf);
  std::fill(w.sum.begin(), w.sum.begin() + rows, 0.0);
  std::fill(w.o.data(), w.o.data() + static_cast<size_t>(rows) * sh.dvp, 0.0);
  std::fill(w.oa.data(), w.oa.data() + static_cast<size_t>(rows) * sh.dvp, 0.0);
  double k_norm2 = 0.0;  // largest ||k||^2 of the hull

  for (int32_t kb = u.col_lo; kb < u.col_hi; kb += kKeyBlock) {
    const int nb = std::min(kKeyBlock, u.col_hi - kb);
    const float* kblock = m.k_block(r, u.kv_head, kb, nb, w.k_gen.data());  // [nb][dp]
    const float* vblock = m.v_block(r, u.kv_head, kb, nb, w.v_gen.data());  // [nb][dvp]
    const int k_avail = m.streamed[r] ? nb : u.col_hi - kb;                 // rows readable past kblock
    int nbp;
    if (packed) {
      nbp = (nb + tiles::kKeyAlign - 1) / tiles::kKeyAlign * tiles::kKeyAlign;
      tiles::pack_kt(kblock, nb, nbp, sh.dp, w.kt.data());
      tiles::pack_v(vblock, nb, sh.dvp, w.v.data());
      k_norm2 = std::max(k_norm2, tiles::max_norm2(kblock, nb, sh.dp));
      tiles::qk_packed(w.q.data(), w.kt.data(), rows, nbp, sh.dp, w.s.data(), kKeyBlock);
    } else {
      nbp = (nb + kOracleLanes - 1) / kOracleLanes * kOracleLanes;
      tiles::qk_dot(w.q.data(), kblock, k_avail, rows, nb, sh.dp, w.s.data(), kKeyBlock, vblock, sh.dvp, &k_norm2);
    }
    for (int i = 0; i < rows; ++i)
      softmax_row(w.s.data() + static_cast<size_t>(i) * kKeyBlock, nbp, kb, nb, rp.ranges_of(u.q_begin + i / g), sh,
                  w.max[static_cast<size_t>(i)], w.sum[static_cast<size_t>(i)],
                  w.o.data() + static_cast<size_t>(i) * sh.dvp, w.oa.data() + static_cast<size_t>(i) * sh.dvp);
    if (packed) tiles::pv(w.s.data(), kKeyBlock, rows, nb, w.v.data(), sh.dvp, w.o.data(), w.oa.data());
    else tiles::pv(w.s.data(), kKeyBlock, rows, nb, vblock, sh.dvp, w.o.data(), w.oa.data());
  }

  for (int i = 0; i < rows; ++i) {
    const int64_t query = query_base + u.q_begin + i / g;
    const int64_t head = u.kv_head * g + i % g;
    double* out = out_layer.out + (query * sh.q_heads + head) * sh.v_head_dim;
    double* abs_out = out_layer.abs_out + (query * sh.q_heads + head) * sh.v_head_dim;
    const double* o = w.o.data() + static_cast<size_t>(i) * sh.dvp;
    const double* oa = w.oa.data() + static_cast<size_t>(i) * sh.dvp;
    double sum = w.sum[static_cast<size_t>(i)], max = w.max[static_cast<size_t>(i)];
    const double keys_seen = sum;
    if (sh.sinks != nullptr)
      fold_sink(sh.sinks[head], max, sum, w.o.data() + static_cast<size_t>(i) * sh.dvp,
                w.oa.data() + static_cast<size_t>(i) * sh.dvp, sh.dvp);
    for (int c = 0; c < sh.v_head_dim; ++c) out[c] = sum > 0.0 ? o[c] / sum : 0.0;
    for (int c = 0; c < sh.v_head_dim; ++c) abs_out[c] = sum > 0.0 ? oa[c] / sum : 0.0;
    out_layer.lse[query * sh.q_heads + head] = sum > 0.0 ? max + std::log(sum) : kNegInf;
    out_layer.qk_norm[query * sh.q_heads + head] =
        keys_seen > 0.0 ? std::sqrt(tiles::max_norm2(w.rows[static_cast<size_t>(i)], 1, sh.dp) * k_norm2) : 0.0;
  }
}

double fma_chains(int64_t iters, double* sink) {
  // More than FMA latency x FMA ports on any current core, and few enough that the chains and the
  // two operands stay in registers (16 vector registers below AVX-512: 12 chains, not 16, or three
  // would spill and run at the speed of a store and a load).
  constexpr int kChains = simd::kLanes == 8 ? 16 : 12;
  simd::vd acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = simd::splat(1.0 + i * 1e-3);
  const simd::vd a = simd::splat(0.999999999), b = simd::splat(1e-9);
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) acc[i] = simd::fma(acc[i], a, b);
  for (int i = 0; i < kChains; ++i) *sink += simd::lane(acc[i], 0);
  return 2.0 * simd::kLanes * kChains * static_cast<double>(iters);
}

double stream_sum(const double* p, int64_t n) {
  using simd::kLanes;
  simd::vd acc[4] = {simd::splat(0), simd::splat(0), simd::splat(0), simd::splat(0)};
  for (int64_t i = 0; i < n; i += 4 * kLanes)
    for (int j = 0; j < 4; ++j) acc[j] = acc[j] + simd::load(p + i + j * kLanes);
  return simd::lane(acc[0] + acc[1] + acc[2] + acc[3], 0);
}

}  // namespace

const OracleKernels& kernels() {
  static const OracleKernels k{static_cast<Isa>(KVFUZZ_ORACLE_ISA_ID),           simd::kIsa, simd::kLanes, attend_unit,
                               static_cast<double (*)(double)>(exp_nonpositive), fma_chains, stream_sum};
  return k;
}

}  // namespace kvfuzz::KVFUZZ_ORACLE_NS

KVFUZZ_ORACLE_END
