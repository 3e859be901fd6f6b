#include "backends/external/batch_request.h"

#include <algorithm>

#include "backends/external/exchange.h"

namespace kvfuzz {

std::string batch_key(const Family& family, const Plan& plan, const std::vector<RunInput>& inputs,
                      const std::string& variant) {
  if (!family.batch_shape || !family.merge) return "";
  const RunInput& in = inputs.front();
  if (largest_pool(inputs) > kSparsePoolElements) return "";
  const std::string shape = family.batch_shape({&plan, &in.scenario, in.batch.num_tokens()});
  if (shape.empty()) return "";
  const Model& m = in.scenario.model;
  char scale[64];
  std::snprintf(scale, sizeof scale, " scale %a softcap %a", static_cast<double>(m.sm_scale),
                static_cast<double>(m.softcap));
  return variant + scale + " | " + shape;  // value sets apart: a batch runs as many as its largest case
}

int64_t largest_pool(const std::vector<RunInput>& inputs) {
  int64_t largest = 0;
  for (const RunInput& in : inputs)
    for (int32_t l = 0; l < in.pools.layers(); ++l) largest = std::max(largest, in.pools.layer(l).dense_elements());
  return largest;
}

namespace {

std::vector<const std::vector<RunInput>*> cases_of(const std::vector<BatchSlot*>& members) {
  std::vector<const std::vector<RunInput>*> cases;
  for (const BatchSlot* s : members) cases.push_back(static_cast<const BatchMember*>(s)->inputs);
  return cases;
}

// The batch's value sets: as many as its case with the most.
std::vector<std::string> set_names_of(const std::vector<BatchSlot*>& members) {
  size_t sets = 0;
  for (const BatchSlot* s : members) sets = std::max(sets, static_cast<const BatchMember*>(s)->inputs->size());
  return value_set_names(sets);
}

}  // namespace

void write_batch(const std::string& dir, const Family& family, const std::vector<BatchSlot*>& members) {
  std::vector<BatchCase> cases;
  int64_t tokens = 0, full = 0, swa = 0;
  for (const BatchSlot* s : members) {
    const auto* m = static_cast<const BatchMember*>(s);
    const RunInput& in = m->inputs->front();
    cases.push_back({m->plan, &in.scenario, in.batch.num_tokens(), tokens, full, swa});
    tokens += in.batch.num_tokens();
    full += in.cache.full_slots;
    swa += in.cache.swa_slots;
  }
  const std::unique_ptr<Plan> plan = family.merge(cases);
  write_batched_execute_request(dir, family, *plan, cases_of(members), set_names_of(members));
}

void read_batch(const std::string& dir, const std::vector<BatchSlot*>& members) {
  const auto cases = cases_of(members);
  const std::vector<std::string> set_names = set_names_of(members);
  for (size_t j = 0; j < set_names.size(); ++j) {
    std::vector<RunOutput*> outputs;
    for (BatchSlot* s : members) {
      std::vector<RunOutput>& own = *static_cast<BatchMember*>(s)->outputs;
      outputs.push_back(j < own.size() ? &own[j] : nullptr);
    }
    read_batched_outputs(dir + "/" + set_names[j], cases, outputs);
  }
}

}  // namespace kvfuzz
