// Online-softmax attention of the oracle's work units (oracle_kernel.h).
#include "reference/oracle_kernel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <omp.h>

#include "reference/oracle_buffer.h"
#include "reference/oracle_exp.h"
#include "reference/oracle_tiles.h"

namespace kvfuzz {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
using tiles::kKeyBlock;

// A thread's working memory, sized for the largest unit of the chunk.
struct Scratch {
  explicit Scratch(const OracleShape& sh, int max_rows)
      : rows(static_cast<size_t>(max_rows)),
        q(static_cast<size_t>(round_rows(max_rows)) * sh.dp),
        kt(static_cast<size_t>(kKeyBlock) * sh.dp),
        v(static_cast<size_t>(kKeyBlock) * sh.dvp),
        s(static_cast<size_t>(round_rows(max_rows)) * kKeyBlock),
        o(static_cast<size_t>(max_rows) * sh.dvp),
        oa(static_cast<size_t>(max_rows) * sh.dvp),
        k_gen(static_cast<size_t>(kKeyBlock) * sh.dp),
        v_gen(static_cast<size_t>(kKeyBlock) * sh.dvp),
        max(static_cast<size_t>(max_rows)),
        sum(static_cast<size_t>(max_rows)) {}
  static int round_rows(int m) { return (m + tiles::kQkRows - 1) / tiles::kQkRows * tiles::kQkRows; }

  std::vector<const float*> rows;  // [M]: the materialised Q row of each unit row
  AlignedBuffer<double> q;         // [M rounded up][dp]: panels (packed form) or rows (dot form)
  AlignedBuffer<double> kt;        // [kKeyBlock / kQkKeys][dp][kQkKeys]: packed K^T of a block
  AlignedBuffer<double> v;         // [kKeyBlock][dvp]: V of a block in double
  AlignedBuffer<double> s;         // [M rounded up][kKeyBlock]: logits, then probabilities
  AlignedBuffer<double> o;         // [M][dvp]: unnormalised output
  AlignedBuffer<double> oa;        // [M][dvp]: unnormalised sum of p |v|
  AlignedBuffer<float> k_gen;      // [kKeyBlock][dp]: a streamed row's K block, generated here
  AlignedBuffer<float> v_gen;      // [kKeyBlock][dvp]: its V block
  std::vector<double> max, sum;    // [M]: running max logit and running sum of e^(s - max)
};

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
void softmax_row(double* s, int nbp, int32_t kb, int nb, std::span<const ColumnRange> ranges,
                 const OracleShape& sh, double& max, double& sum, double* o, double* oa) {
  using namespace simd;
  for (int j = 0; j < nbp; j += kLanes) store(s + j, load(s + j) * splat(sh.sm_scale));
  if (sh.softcap > 0.0)
    for (int j = 0; j < nb; ++j) s[j] = sh.softcap * std::tanh(s[j] / sh.softcap);
  mask_row(s, nbp, kb, nb, ranges);
  vd vmax = splat(kNegInf);
  for (int j = 0; j < nbp; j += kLanes) vmax = simd::max(vmax, load(s + j));
  const double new_max = std::max(max, hmax(vmax));
  const double shift = new_max == kNegInf ? 0.0 : new_max;  // nothing seen yet: all e^-inf = 0
  vd vsum = splat(0.0);
  for (int j = 0; j < nbp; j += kLanes) {
    const vd p = exp_nonpositive(load(s + j) - splat(shift));
    store(s + j, p);
    vsum = vsum + p;
  }
  const double alpha = exp_nonpositive(max - shift);
  sum = sum * alpha + hsum(vsum);
  max = new_max;
  if (alpha != 1.0)
    for (int c = 0; c < sh.dvp; c += kLanes) {
      store(o + c, load(o + c) * splat(alpha));
      store(oa + c, load(oa + c) * splat(alpha));
    }
}

void attend_unit(const WorkUnit& u, const RowPlan& rp, size_t r, const Materialised& m, int64_t query_base,
                 const LayerOut& out_layer, Scratch& w) {
  const OracleShape& sh = m.shape;
  const int g = sh.group;
  const int rows = (u.q_end - u.q_begin) * g;
  const bool packed = rows >= tiles::kPackMinRows;
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
      nbp = (nb + tiles::kQkKeys - 1) / tiles::kQkKeys * tiles::kQkKeys;
      tiles::pack_kt(kblock, nb, nbp, sh.dp, w.kt.data());
      tiles::pack_v(vblock, nb, sh.dvp, w.v.data());
      k_norm2 = std::max(k_norm2, tiles::max_norm2(kblock, nb, sh.dp));
      tiles::qk_packed(w.q.data(), w.kt.data(), rows, nbp, sh.dp, w.s.data(), kKeyBlock);
    } else {
      nbp = simd::round_up_lanes(nb);
      tiles::qk_dot(w.q.data(), kblock, k_avail, rows, nb, sh.dp, w.s.data(), kKeyBlock, vblock, sh.dvp, &k_norm2);
    }
    for (int i = 0; i < rows; ++i)
      softmax_row(w.s.data() + static_cast<size_t>(i) * kKeyBlock, nbp, kb, nb, rp.ranges_of(u.q_begin + i / g), sh,
                  w.max[static_cast<size_t>(i)], w.sum[static_cast<size_t>(i)], w.o.data() + static_cast<size_t>(i) * sh.dvp,
                  w.oa.data() + static_cast<size_t>(i) * sh.dvp);
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
    const double sum = w.sum[static_cast<size_t>(i)];
    for (int c = 0; c < sh.v_head_dim; ++c) out[c] = sum > 0.0 ? o[c] / sum : 0.0;
    for (int c = 0; c < sh.v_head_dim; ++c) abs_out[c] = sum > 0.0 ? oa[c] / sum : 0.0;
    out_layer.lse[query * sh.q_heads + head] = sum > 0.0 ? w.max[static_cast<size_t>(i)] + std::log(sum) : kNegInf;
    out_layer.qk_norm[query * sh.q_heads + head] =
        sum > 0.0 ? std::sqrt(tiles::max_norm2(w.rows[static_cast<size_t>(i)], 1, sh.dp) * k_norm2) : 0.0;
  }
}

}  // namespace

void attend(std::span<const WorkUnit> units, std::span<const RowPlan> rows, const LogicalBatch& lb,
            const Materialised& m, const LayerOut& layer, int threads) {
  int max_rows = 1;
  for (const WorkUnit& u : units) max_rows = std::max(max_rows, (u.q_end - u.q_begin) * m.shape.group);
  const int nt = threads > 0 ? threads : omp_get_max_threads();
  const auto n = static_cast<int64_t>(units.size());
#pragma omp parallel num_threads(nt)
  {
    Scratch w(m.shape, max_rows);
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < n; ++i) {
      const WorkUnit& u = units[static_cast<size_t>(i)];
      const auto r = static_cast<size_t>(u.row_plan);
      attend_unit(u, rows[r], r, m, lb.q_indptr[static_cast<size_t>(rows[r].row)], layer, w);
    }
  }
}

}  // namespace kvfuzz
