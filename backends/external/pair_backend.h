// A backend made of a planner and an executor of one family, either of which may be external:
// kvfuzz's planner feeding a user's kernel, or a user's planner feeding kvfuzz's checked executor.
//
// Where it sits: registered by `--adapter` (registry.h) beside the built-in backends, so every
// command — check, run, shrink, explain, faults — works on it unchanged. Named
// "<planner>:<executor>" ("fa:numpy_page_table", "my_planner:fa"). An external executor gives no
// read log (records_reads() is false): the properties recover its read set from probe runs
// (properties/opaque_extent.h), which run_many sends in one round trip.
//
//   auto pair = std::make_unique<PairBackend>(fa_backend(), adapter);   // built-in planner
#pragma once

#include <memory>
#include <string>

#include "backends/backend.h"
#include "backends/contract/families.h"
#include "backends/external/adapter.h"

namespace kvfuzz {

class PairBackend final : public Backend {
 public:
  // Exactly one of each pair of arguments is set.
  PairBackend(const Backend* planner, std::shared_ptr<Adapter> external_planner, const Backend* executor,
              std::shared_ptr<Adapter> external_executor);

  std::string_view name() const override { return name_; }
  std::string_view family() const override { return family_->name; }
  std::string_view summary() const override { return summary_; }
  Support supports(const Scenario& s) const override;
  int32_t kernel_page_size(const Scenario& s) const override;
  bool records_reads() const override { return executor_ != nullptr; }
  KernelRounding rounding() const override;
  std::vector<FaultInfo> faults() const override { return planner_ ? planner_->faults() : std::vector<FaultInfo>{}; }
  std::vector<std::string> replay_flags() const override;
  std::unique_ptr<Plan> plan(const PlanInput& in) const override;
  void run(const Plan& plan, const RunInput& in, RunOutput& out) const override;
  void run_many(const Plan& plan, const std::vector<RunInput>& inputs, std::vector<RunOutput>& outputs) const override;

  // Compile ahead (fuzz/compile_ahead.h): the executor servers that want a warm-up of `s`'s kernel
  // variant (Adapter::wants_warm_up; none without servers), idlest first, and `in` run once on one of them as a
  // warm-up, its answer discarded (false: it failed).
  std::vector<size_t> cold_servers(const Scenario& s) const;
  bool warm_up(const Plan& plan, const RunInput& in, size_t server) const;

  const Adapter* external_planner() const { return ext_planner_.get(); }
  const Adapter* external_executor() const { return ext_executor_.get(); }

 private:
  const Backend* planner_;
  std::shared_ptr<Adapter> ext_planner_;
  const Backend* executor_;
  std::shared_ptr<Adapter> ext_executor_;
  const Family* family_;
  std::string name_, summary_;
};

}  // namespace kvfuzz
