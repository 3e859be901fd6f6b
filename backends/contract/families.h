// The metadata families of the backend contract: page_table, paged_csr, token_csr, mla.
//
// Where it sits: a backend is a planner (forward batch -> metadata) and an executor (metadata +
// Q + pools -> output and LSE); backends of one family exchange the same metadata, so any planner
// of a family pairs with any executor of it (backends/external/pair_backend.h). Each family has
// a schema — its plan's field list (`*_plan_io.cc`), documented in FAMILIES.md — through which
// plans cross a process boundary, and a built-in checked executor.
//
//   const Family* f = find_family("page_table");
//   ArraySet set; f->write(plan, set);          // to an external executor
//   std::unique_ptr<Plan> p = f->read(set);     // from an external planner (throws ContractError)
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "backends/contract/plan_io.h"

namespace kvfuzz {

inline constexpr int kContractVersion = 1;

// One case of a batch: independent cases of one shape run as one kernel call, their rows
// concatenated, their tokens and pool slots offset (backends/external/batch_request.h).
struct BatchCase {
  const Plan* plan = nullptr;
  const Scenario* scenario = nullptr;
  int64_t num_tokens = 0;
  int64_t token_offset = 0;                           // where its tokens start in the batch's
  int64_t full_slot_offset = 0, swa_slot_offset = 0;  // where its pools start in the batch's
};

struct Family {
  std::string_view name;
  std::string_view summary;
  void (*write)(const Plan& plan, ArraySet& set);
  std::unique_ptr<Plan> (*read)(const ArraySet& set);
  const Backend& (*executor)();  // the built-in backend whose run() is the family's checked executor
  // Batching; null: the family's cases always run one by one. `batch_shape`: the plan's structure
  // (groups, calls, flags), equal for cases that can run as one call; "" when this one cannot.
  // `merge`: the batch's plan, each case's rows in order, its slots moved by its offsets.
  std::string (*batch_shape)(const BatchCase& c) = nullptr;
  std::unique_ptr<Plan> (*merge)(const std::vector<BatchCase>& cases) = nullptr;
};

const std::vector<Family>& families();
const Family* find_family(std::string_view name);

// Each family's schema (in its backend's folder).
namespace fa {
void write_plan(const Plan& plan, ArraySet& set);
std::unique_ptr<Plan> read_plan(const ArraySet& set);
std::string batch_shape(const BatchCase& c);  // fa_plan_batch.cc
std::unique_ptr<Plan> merge_plans(const std::vector<BatchCase>& cases);
}  // namespace fa
namespace flashinfer {
void write_plan(const Plan& plan, ArraySet& set);
std::unique_ptr<Plan> read_plan(const ArraySet& set);
std::string batch_shape(const BatchCase& c);  // flashinfer_plan_batch.cc
std::unique_ptr<Plan> merge_plans(const std::vector<BatchCase>& cases);
}  // namespace flashinfer
namespace triton {
void write_plan(const Plan& plan, ArraySet& set);
std::unique_ptr<Plan> read_plan(const ArraySet& set);
std::string batch_shape(const BatchCase& c);  // triton_plan_batch.cc
std::unique_ptr<Plan> merge_plans(const std::vector<BatchCase>& cases);
}  // namespace triton
namespace mla {
void write_plan(const Plan& plan, ArraySet& set);
std::unique_ptr<Plan> read_plan(const ArraySet& set);
std::string batch_shape(const BatchCase& c);  // mla_plan_batch.cc
std::unique_ptr<Plan> merge_plans(const std::vector<BatchCase>& cases);
}  // namespace mla

}  // namespace kvfuzz
