// The oracle's attention over a chunk's work units (oracle_kernel.h): one scratch per thread, the
// units in parallel, each by the kernels of the ISA in use (oracle_dispatch.h).
#include "reference/oracle_kernel.h"

#include <algorithm>

#include <omp.h>

#include "reference/oracle_dispatch.h"
#include "reference/oracle_scratch.h"

namespace kvfuzz {

void attend(std::span<const WorkUnit> units, std::span<const RowPlan> rows, const LogicalBatch& lb,
            const Materialised& m, const LayerOut& layer, int threads) {
  const OracleKernels& kernels = oracle_kernels();
  int max_rows = 1;
  for (const WorkUnit& u : units) max_rows = std::max(max_rows, (u.q_end - u.q_begin) * m.shape.group);
  const int nt = threads > 0 ? threads : omp_get_max_threads();
  const auto n = static_cast<int64_t>(units.size());
#pragma omp parallel num_threads(nt)
  {
    OracleScratch w(m.shape, max_rows);
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < n; ++i) {
      const WorkUnit& u = units[static_cast<size_t>(i)];
      const auto r = static_cast<size_t>(u.row_plan);
      kernels.attend_unit(u, rows[r], r, m, lb.q_indptr[static_cast<size_t>(rows[r].row)], layer, w);
    }
  }
}

}  // namespace kvfuzz
