#include "properties/case_context.h"

#include "reference/validate.h"

namespace kvfuzz {

CaseContext::CaseContext(Scenario s, int oracle_threads)
    : scenario_(std::move(s)),
      prepared_((validate(scenario_), prepare(scenario_))),
      logical_(derive_logical(scenario_)),
      values_(scenario_),
      tensors_(std::make_unique<BatchTensors>(scenario_, prepared_.batch, values_)),
      oracle_threads_(oracle_threads) {
  const ForwardBatch& fb = prepared_.batch;
  for (int32_t i = 0; i < fb.padded_bs; ++i) {
    for (int32_t j = 0; j < fb.extend_lens[static_cast<size_t>(i)]; ++j) {
      token_row_.push_back(i);
      token_query_.push_back(j);
    }
  }
  const auto layers = static_cast<int32_t>(scenario_.model.layers.size());
  const auto rows = static_cast<int32_t>(logical_.rows.size());
  row_visible_.resize(static_cast<size_t>(layers * rows));
  for (int32_t l = 0; l < layers; ++l) {
    for (int32_t r = 0; r < rows; ++r) {
      const LogicalRow& row = logical_.rows[static_cast<size_t>(r)];
      auto& bits = row_visible_[static_cast<size_t>(l * rows + r)];
      bits.assign(static_cast<size_t>(row.kv_cols), 0);
      for (size_t q = 0; q < row.queries.size(); ++q) {
        for (const ColumnRange& cr : visible(scenario_.model.layers[static_cast<size_t>(l)], row, static_cast<int32_t>(q)))
          for (int32_t c = cr.begin; c < cr.end; ++c) bits[static_cast<size_t>(c)] = 1;
      }
    }
  }
}

const OracleResult& CaseContext::oracle() const {
  if (!oracle_) oracle_ = run_oracle(scenario_, logical_, values_, oracle_threads_);
  return *oracle_;
}

bool CaseContext::visible_to_row(int32_t layer, int32_t row, int32_t column) const {
  const auto rows = static_cast<int32_t>(logical_.rows.size());
  if (row < 0 || row >= rows) return false;
  const auto& bits = row_visible_[static_cast<size_t>(layer * rows + row)];
  return column >= 0 && column < static_cast<int32_t>(bits.size()) && bits[static_cast<size_t>(column)] != 0;
}

}  // namespace kvfuzz
