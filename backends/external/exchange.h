// What crosses the process boundary for one request: the files kvfuzz writes into a request
// folder and the files it reads back (PROTOCOL.md gives the layout; FAMILIES.md the metadata).
//
// Where it sits: between the pair backend (pair_backend.h), which decides what to send, and the
// adapter process, which only moves messages. Writing is plain data; reading validates every
// array's dtype and shape against the case and throws ContractError naming the file.
//
//   write_execute_request(dir, family, plan, inputs, {"main"});
//   read_outputs(dir + "/main", in, out);                 // after the adapter answered
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/contract/families.h"

namespace kvfuzz {

// The model, cache and batch facts every request carries (manifest.json "case").
nlohmann::json case_manifest(const Scenario& s, const CacheState& cache, const ForwardBatch& fb);

// Pools of more dense K elements (num_slots x kv_heads x head_dim) than this go out sparse:
// `<set>/k_cache.<l>.slots.npy` (the stored slots, ascending), `.rows.npy` (their rows) and
// `.fill.npy` (what every other slot holds); smaller ones as one dense `<set>/k_cache.<l>.npy`.
inline constexpr int64_t kSparsePoolElements = int64_t{1} << 26;

// An executor request: the family's metadata at the top of `dir`, one sub-folder of Q, new K/V
// and pools per value set. The pools must already hold the step's new K/V.
// `sparse_above` moves the threshold (tests write one case both ways).
void write_execute_request(const std::string& dir, const Family& family, const Plan& plan,
                           const std::vector<RunInput>& inputs, const std::vector<std::string>& set_names,
                           int64_t sparse_above = kSparsePoolElements);

// The folders of a request's value sets: "main", then "set1", "set2", ...
std::vector<std::string> value_set_names(size_t sets);

// Several independent runs of one shape as one request (batch_request.h): `plan` is their merged
// plan (Family::merge), `runs` the inputs in the merge's order (a batch's cases' value sets, each a
// run), laid end to end in the one value set "main": tokens, and each layer's pool slots; the
// manifest's counts (num_tokens, pools, bs) summed. Dense pools.
void write_batched_execute_request(const std::string& dir, const Family& family, const Plan& plan,
                                   const std::vector<const RunInput*>& runs);
// Splits the batch's outputs (`dir`: its value set's folder) back into each run's.
void read_batched_outputs(const std::string& dir, const std::vector<const RunInput*>& runs,
                          const std::vector<RunOutput*>& outputs);

// Reads `dir`/out.npy and lse.npy of one value set into `out`.
void read_outputs(const std::string& dir, const RunInput& in, RunOutput& out);

// A planner request: what a production planner sees (req_to_token, full_to_swa, the forward
// batch's tensors, the model config).
void write_plan_request(const std::string& dir, const PlanInput& in);

// The adapter's plan, `dir`/plan.json and its arrays, read through the family's schema.
std::unique_ptr<Plan> read_plan_answer(const std::string& dir, const Family& family);

// The answer's "plan_run" list (PROTOCOL.md), or none; throws ContractError when it is malformed.
//   plan->plan_run = read_plan_run(answer);
std::vector<PlanRunDisagreement> read_plan_run(const nlohmann::json& answer);

}  // namespace kvfuzz
