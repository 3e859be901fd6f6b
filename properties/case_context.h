// Everything the properties need about one scenario, computed once and shared by all backends:
// the prepared cache and batch, the logical view, the oracle's answer, the batch tensors.
//
// Where it sits: scenario -> **case context** -> run_backend -> properties.
//
//   CaseContext ctx(scenario);            // throws InvalidCase for an invalid scenario
//   const OracleResult& o = ctx.oracle();
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "backends/common/batch_tensors.h"
#include "reference/forward_batch.h"
#include "reference/logical.h"
#include "reference/oracle.h"
#include "reference/values.h"

namespace kvfuzz {

class CaseContext {
 public:
  explicit CaseContext(Scenario s, int oracle_threads = 1);

  const Scenario& scenario() const { return scenario_; }
  const Prepared& prepared() const { return prepared_; }
  const ForwardBatch& batch() const { return prepared_.batch; }
  const LogicalBatch& logical() const { return logical_; }
  const ValueSource& values() const { return values_; }
  const BatchTensors& tensors() const { return *tensors_; }
  const OracleResult& oracle() const;  // computed on first use

  // Batch row of each query token, [num_tokens].
  int32_t row_of(int64_t token) const { return token_row_[static_cast<size_t>(token)]; }
  // Index of a real token in the logical view's query numbering (== token for real rows).
  int32_t query_in_row(int64_t token) const { return token_query_[static_cast<size_t>(token)]; }

  // Whether some query of `row` may see `column` in `layer` (for the metadata checks).
  bool visible_to_row(int32_t layer, int32_t row, int32_t column) const;

 private:
  Scenario scenario_;
  Prepared prepared_;
  LogicalBatch logical_;
  ValueSource values_;
  std::unique_ptr<BatchTensors> tensors_;
  int oracle_threads_;
  mutable std::optional<OracleResult> oracle_;
  std::vector<int32_t> token_row_, token_query_;
  std::vector<std::vector<uint8_t>> row_visible_;  // [layer * rows + row][column]
};

}  // namespace kvfuzz
