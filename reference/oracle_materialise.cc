// Reads a chunk's Q, K and V from the value source into padded float arrays (oracle_materialise.h).
#include "reference/oracle_materialise.h"

#include <algorithm>

#include <omp.h>

namespace kvfuzz {
namespace {

constexpr int32_t kColumnsPerItem = 64;  // K/V columns filled by one parallel work item

// The row holding item i of a CSR offset array.
size_t row_of(const std::vector<int64_t>& base, int64_t i) {
  return static_cast<size_t>(std::upper_bound(base.begin(), base.end(), i) - base.begin()) - 1;
}

}  // namespace

void materialise(const ValueSource& values, int32_t layer, const LogicalBatch& lb, std::span<const RowPlan> rows,
                 std::span<const WorkUnit> units, const OracleShape& shape, int threads, KvStorage storage,
                 Materialised& m) {
  m.shape = shape;
  m.values = &values;
  m.layer = layer;
  m.kv_base.assign(1, 0);
  m.q_base.assign(1, 0);
  m.col_lo.clear();
  m.col_hi.clear();
  m.request.clear();
  // A row is streamed when one unit per kv head covers all its queries: then nothing reads its
  // K/V twice.
  std::vector<int32_t> units_per_row(rows.size(), 0);
  for (const WorkUnit& u : units)
    if (u.kv_head == 0) ++units_per_row[static_cast<size_t>(u.row_plan)];
  m.streamed.assign(rows.size(), 0);
  std::vector<int64_t> item_base{0};  // [rows + 1]: parallel K/V items (kv head x column block) per row
  for (size_t r = 0; r < rows.size(); ++r) {
    const RowPlan& rp = rows[r];
    m.streamed[r] = storage == KvStorage::stream_read_once && units_per_row[r] == 1;
    const int64_t stored = m.streamed[r] ? 0 : rp.col_hi - rp.col_lo;
    m.kv_base.push_back(m.kv_base.back() + stored);
    m.q_base.push_back(m.q_base.back() + rp.queries());
    m.col_lo.push_back(rp.col_lo);
    m.col_hi.push_back(rp.col_hi);
    m.request.push_back(lb.rows[static_cast<size_t>(rp.row)].request);
    item_base.push_back(item_base.back() + shape.kv_heads * ((stored + kColumnsPerItem - 1) / kColumnsPerItem));
  }
  const int64_t cols = m.kv_base.back(), queries = m.q_base.back(), items = item_base.back();
  m.q.ensure(static_cast<size_t>(queries * shape.q_heads * shape.dp));
  m.k.ensure(static_cast<size_t>(cols * shape.kv_heads * shape.dp));
  m.v.ensure(static_cast<size_t>(cols * shape.kv_heads * shape.dvp));
  const int nt = threads > 0 ? threads : omp_get_max_threads();

#pragma omp parallel num_threads(nt)
  {
#pragma omp for schedule(dynamic, 4) nowait
    for (int64_t i = 0; i < items; ++i) {
      const size_t r = row_of(item_base, i);
      const int64_t blocks = (m.cols(r) + kColumnsPerItem - 1) / kColumnsPerItem;
      const auto h = static_cast<int32_t>((i - item_base[r]) / blocks);
      const auto first = static_cast<int32_t>((i - item_base[r]) % blocks * kColumnsPerItem);
      const auto n = static_cast<int32_t>(std::min<int64_t>(kColumnsPerItem, m.cols(r) - first));
      values.fill_columns(layer, Tensor::k, m.request[r], m.col_lo[r] + first, n, h,
                          m.k.data() + m.k_offset(r, h) + int64_t{first} * shape.dp, shape.dp);
      values.fill_columns(layer, Tensor::v, m.request[r], m.col_lo[r] + first, n, h,
                          m.v.data() + m.v_offset(r, h) + int64_t{first} * shape.dvp, shape.dvp);
    }
#pragma omp for schedule(static, 4)
    for (int64_t i = 0; i < queries; ++i) {
      const size_t r = row_of(m.q_base, i);
      const LogicalRow& row = lb.rows[static_cast<size_t>(rows[r].row)];
      const auto q = static_cast<int32_t>(i - m.q_base[r]);
      const int32_t column = row.queries[static_cast<size_t>(q)].column;
      for (int32_t h = 0; h < shape.q_heads; ++h)
        values.fill_columns(layer, Tensor::q, row.request, column, 1, h, m.q.data() + m.q_offset(r, q, h), shape.dp);
    }
  }
}

}  // namespace kvfuzz
