// Reads a chunk's Q, K and V from the value source into padded float arrays (oracle_materialise.h).
#include "reference/oracle_materialise.h"

#include <algorithm>

#include <omp.h>

namespace kvfuzz {
namespace {

// Writes one head vector of `width` values and zeroes its padding up to `padded`.
void fill_padded(const ValueSource& values, int32_t layer, Tensor t, int32_t request, int32_t column,
                 int32_t head, int32_t width, int32_t padded, float* out) {
  values.fill(layer, t, request, column, head, std::span<float>(out, static_cast<size_t>(width)));
  std::fill(out + width, out + padded, 0.0f);
}

// The row holding item i of a CSR offset array.
size_t row_of(const std::vector<int64_t>& base, int64_t i) {
  return static_cast<size_t>(std::upper_bound(base.begin(), base.end(), i) - base.begin()) - 1;
}

}  // namespace

void materialise(const ValueSource& values, int32_t layer, const LogicalBatch& lb, std::span<const RowPlan> rows,
                 const OracleShape& shape, int threads, Materialised& m) {
  m.shape = shape;
  m.col_base.assign(1, 0);
  m.q_base.assign(1, 0);
  m.col_lo.clear();
  for (const RowPlan& rp : rows) {
    m.col_base.push_back(m.col_base.back() + (rp.col_hi - rp.col_lo));
    m.q_base.push_back(m.q_base.back() + rp.queries());
    m.col_lo.push_back(rp.col_lo);
  }
  const int64_t cols = m.col_base.back(), queries = m.q_base.back();
  m.q.ensure(static_cast<size_t>(queries * shape.q_heads * shape.dp));
  m.k.ensure(static_cast<size_t>(cols * shape.kv_heads * shape.dp));
  m.v.ensure(static_cast<size_t>(cols * shape.kv_heads * shape.dvp));
  const int nt = threads > 0 ? threads : omp_get_max_threads();

#pragma omp parallel num_threads(nt)
  {
#pragma omp for schedule(static, 16) nowait
    for (int64_t i = 0; i < cols; ++i) {
      const size_t r = row_of(m.col_base, i);
      const LogicalRow& row = lb.rows[static_cast<size_t>(rows[r].row)];
      const int64_t local = i - m.col_base[r];
      const auto column = static_cast<int32_t>(rows[r].col_lo + local);
      for (int32_t h = 0; h < shape.kv_heads; ++h) {
        float* k = m.k.data() + m.k_offset(r, h) + local * shape.dp;
        float* v = m.v.data() + m.v_offset(r, h) + local * shape.dvp;
        fill_padded(values, layer, Tensor::k, row.request, column, h, shape.head_dim, shape.dp, k);
        fill_padded(values, layer, Tensor::v, row.request, column, h, shape.v_head_dim, shape.dvp, v);
      }
    }
#pragma omp for schedule(static, 4)
    for (int64_t i = 0; i < queries; ++i) {
      const size_t r = row_of(m.q_base, i);
      const LogicalRow& row = lb.rows[static_cast<size_t>(rows[r].row)];
      const auto q = static_cast<int32_t>(i - m.q_base[r]);
      const int32_t column = row.queries[static_cast<size_t>(q)].column;
      for (int32_t h = 0; h < shape.q_heads; ++h)
        fill_padded(values, layer, Tensor::q, row.request, column, h, shape.head_dim, shape.dp,
                    m.q.data() + m.q_offset(r, q, h));
    }
  }
}

}  // namespace kvfuzz
