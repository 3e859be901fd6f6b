// The logical Q, K and V of a chunk of rows, read once from the value source into flat arrays.
//
// Where it sits: second step of run_oracle (oracle.cc), between the plan (oracle_plan.h) and the
// kernel (oracle_kernel.h). It reads values by (layer, request, column, head), never through a
// pool, for each row's queries and for the hull of the columns they see. Values are exact in
// float (values.h), so nothing is lost before the kernel widens them to double. Rows are zero
// padded to whole SIMD vectors. Filling is the slow part of the oracle (a hash per element) and
// runs in parallel; each element is written by exactly one thread.
//
//   Materialised m;
//   materialise(values, layer, lb, rows, shape, threads, m);
//   const float* k = m.k_at(r, kv_head);  // [rows[r].col_hi - rows[r].col_lo][shape.dp]
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "reference/logical.h"
#include "reference/oracle_buffer.h"
#include "reference/oracle_plan.h"
#include "reference/values.h"

namespace kvfuzz {

struct Materialised {
  OracleShape shape;
  std::vector<int64_t> col_base;  // [rows + 1]: first hull column of each row, counted over the chunk
  std::vector<int64_t> q_base;    // [rows + 1]: first query of each row, counted over the chunk
  std::vector<int32_t> col_lo;    // [rows]: the row's first materialised column
  AlignedBuffer<float> q;         // [queries][q_heads][dp]
  AlignedBuffer<float> k;         // per row: [kv_heads][hull columns][dp]
  AlignedBuffer<float> v;         // per row: [kv_heads][hull columns][dvp]

  int64_t cols(size_t r) const { return col_base[r + 1] - col_base[r]; }
  // K of column c of row r, kv head h, is at k[k_offset(r, h) + (c - col_lo[r]) * dp]; V likewise.
  int64_t k_offset(size_t r, int32_t kv_head) const {
    return (col_base[r] * shape.kv_heads + kv_head * cols(r)) * shape.dp;
  }
  int64_t v_offset(size_t r, int32_t kv_head) const {
    return (col_base[r] * shape.kv_heads + kv_head * cols(r)) * shape.dvp;
  }
  // Q of query `query` (of the row), q head h of row r.
  int64_t q_offset(size_t r, int32_t query, int32_t q_head) const {
    return ((q_base[r] + query) * shape.q_heads + q_head) * shape.dp;
  }
  const float* k_at(size_t r, int32_t kv_head) const { return k.data() + k_offset(r, kv_head); }
  const float* v_at(size_t r, int32_t kv_head) const { return v.data() + v_offset(r, kv_head); }
  const float* q_at(size_t r, int32_t query, int32_t q_head) const { return q.data() + q_offset(r, query, q_head); }
};

// Fills `m` with the rows' Q/K/V, reusing its buffers where they are large enough.
void materialise(const ValueSource& values, int32_t layer, const LogicalBatch& lb, std::span<const RowPlan> rows,
                 const OracleShape& shape, int threads, Materialised& m);

}  // namespace kvfuzz
