// A thread's working memory in the oracle's attention kernel, the same for every ISA.
//
// Where it sits: attend (oracle_kernel.cc) gives one to each thread, sized for the chunk's largest
// unit; the ISA's attend_unit (oracle_isa_kernels.cc, through oracle_dispatch.h) works in it.
// Sizes are those of the widest ISA, so one layout serves all.
//
//   OracleScratch w(shape, max_rows);
//   oracle_kernels().attend_unit(unit, row_plan, r, m, query_base, out, w);
#pragma once

#include <vector>

#include "reference/oracle_buffer.h"
#include "reference/oracle_plan.h"

namespace kvfuzz {

inline constexpr int kKeyBlock = 128;         // keys per block of the online softmax
inline constexpr int kPackMinRows = 16;       // units with fewer rows use the dot form (oracle_tiles.h)
inline constexpr int kOracleScratchRows = 8;  // rows are rounded up to this: whole Q panels on every ISA

struct OracleScratch {
  OracleScratch(const OracleShape& sh, int max_rows)
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
  static int round_rows(int m) { return (m + kOracleScratchRows - 1) / kOracleScratchRows * kOracleScratchRows; }

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

}  // namespace kvfuzz
