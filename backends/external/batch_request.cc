#include "backends/external/batch_request.h"

#include <algorithm>

#include "backends/external/exchange.h"

namespace kvfuzz {

std::string batch_key(const Family& family, const Plan& plan, const std::vector<RunInput>& inputs,
                      const std::string& variant) {
  if (!family.batch_shape || !family.merge) return "";
  const RunInput& in = inputs.front();
  if (pool_elements(inputs) > kSparsePoolElements) return "";  // its sets' pools, dense, would be too large
  const std::string shape = family.batch_shape({&plan, &in.scenario, in.batch.num_tokens()});
  if (shape.empty()) return "";
  const Model& m = in.scenario.model;
  char scale[64];
  std::snprintf(scale, sizeof scale, " scale %a softcap %a", static_cast<double>(m.sm_scale),
                static_cast<double>(m.softcap));
  return variant + scale + " | " + shape;
}

int64_t pool_elements(const std::vector<RunInput>& inputs) {
  int64_t all = 0;
  for (const RunInput& in : inputs) {
    int64_t largest = 0;
    for (int32_t l = 0; l < in.pools.layers(); ++l) largest = std::max(largest, in.pools.layer(l).dense_elements());
    all += largest;
  }
  return all;
}

namespace {

// The batch's runs: every member's every value set, in order.
std::vector<const RunInput*> runs_of(const std::vector<BatchSlot*>& members) {
  std::vector<const RunInput*> runs;
  for (const BatchSlot* s : members)
    for (const RunInput& in : *static_cast<const BatchMember*>(s)->inputs) runs.push_back(&in);
  return runs;
}

}  // namespace

void write_batch(const std::string& dir, const Family& family, const std::vector<BatchSlot*>& members) {
  const std::vector<const RunInput*> runs = runs_of(members);
  std::vector<BatchCase> cases;
  int64_t tokens = 0, full = 0, swa = 0;
  size_t r = 0;
  for (const BatchSlot* s : members) {
    const auto* m = static_cast<const BatchMember*>(s);
    for (size_t j = 0; j < m->inputs->size(); ++j, ++r) {
      const RunInput& in = *runs[r];
      cases.push_back({m->plan, &in.scenario, in.batch.num_tokens(), tokens, full, swa});
      tokens += in.batch.num_tokens();
      full += in.cache.full_slots;
      swa += in.cache.swa_slots;
    }
  }
  const std::unique_ptr<Plan> plan = family.merge(cases);
  write_batched_execute_request(dir, family, *plan, runs);
}

void read_batch(const std::string& dir, const std::vector<BatchSlot*>& members) {
  std::vector<RunOutput*> outputs;
  for (BatchSlot* s : members)
    for (RunOutput& o : *static_cast<BatchMember*>(s)->outputs) outputs.push_back(&o);
  read_batched_outputs(dir + "/" + value_set_names(1).front(), runs_of(members), outputs);
}

}  // namespace kvfuzz
