#include "backends/external/pair_backend.h"

#include <algorithm>
#include <sstream>

#include "backends/external/batch_request.h"
#include "backends/external/exchange.h"
#include "backends/kv_store.h"

namespace kvfuzz {
namespace {

// The model side of a kernel variant: dtype, heads, head widths, MLA, softcap on or off, page
// size, layer kinds and fp8 scales (what cases must share to batch, with their plan's structure).
std::string model_variant(const Scenario& s) {
  const Model& m = s.model;
  std::string v = std::string(to_string(s.values.dtype)) + " heads " + std::to_string(m.q_heads) + "/" +
                  std::to_string(m.kv_heads) + " dims " + std::to_string(m.head_dim) + "/" +
                  std::to_string(m.v_head_dim) + (m.mla ? " mla" : "") + (m.softcap > 0 ? " softcap" : "") + " ps " +
                  std::to_string(s.cache.page_size) + " layers";
  for (const Layer& l : m.layers) {
    v += " " + to_string(l.kind);
    // a batched call hands the kernel one pair of fp8 scales per layer
    if (l.scaled()) v += " scales " + std::to_string(l.k_scale) + "/" + std::to_string(l.v_scale);
  }
  return v;
}

// The kernel variant a case needs, as far as real kernels compile one per combination: the model
// side and the batch mode. A worker's first request of a variant is where its JIT compiles land
// (AdapterStats::first_call_nanoseconds).
std::string kernel_variant(const Scenario& s) { return model_variant(s) + " " + to_string(s.batch.mode); }

// The kernel sees the pools with the step's new K/V already written (set_kv_buffer).
void store_step_kv(const std::vector<RunInput>& inputs) {
  for (const RunInput& in : inputs) {
    const std::vector<int64_t> locs = step_cache_locs(in.batch);
    for (int32_t l = 0; l < in.pools.layers(); ++l) store_new_kv(l, locs, in);
  }
}

}  // namespace

PairBackend::PairBackend(const Backend* planner, std::shared_ptr<Adapter> external_planner, const Backend* executor,
                         std::shared_ptr<Adapter> external_executor)
    : planner_(planner),
      ext_planner_(std::move(external_planner)),
      executor_(executor),
      ext_executor_(std::move(external_executor)) {
  const std::string fam = planner_ ? std::string(planner_->family()) : ext_planner_->spec().family;
  family_ = find_family(fam);
  const std::string pname = planner_ ? std::string(planner_->name()) : ext_planner_->spec().name;
  const std::string ename = executor_ ? std::string(executor_->name()) : ext_executor_->spec().name;
  name_ = pname + ":" + ename;
  auto side = [](const Backend* b, const std::shared_ptr<Adapter>& a, const char* role) {
    if (b) return std::string(role) + " " + std::string(b->name()) + " (built in)";
    return std::string(role) + " " + a->spec().name + " (adapter '" + a->spec().command + "'" +
           (a->spec().description.empty() ? "" : ": " + a->spec().description) + "; " + a->spec().support_line() + ")";
  };
  summary_ = "family " + std::string(family_->name) + ": " + side(planner_, ext_planner_, "planner") + " + " +
             side(executor_, ext_executor_, "executor");
}

KernelRounding PairBackend::rounding() const {
  if (executor_) return executor_->rounding();
  const AdapterSpec& spec = ext_executor_->spec();
  KernelRounding r;
  if (spec.p_dtype != "cache") r.p_dtype = *parse_dtype(spec.p_dtype);
  r.out_dtype = spec.out_dtype == "cache" ? std::nullopt : parse_dtype(spec.out_dtype);
  r.extra_merges = spec.max_merges;
  r.row_sum_rounded = spec.row_sum_rounded;
  r.qk_products = spec.qk_products;
  r.tile_keys = spec.tile_keys;  // 1 unless declared: nothing is known of its tiling
  r.split_keys = spec.split_keys;
  return r;
}

int32_t PairBackend::kernel_page_size(const Scenario& s) const {
  return planner_ ? planner_->kernel_page_size(s) : s.cache.page_size;
}

Support PairBackend::supports(const Scenario& s) const {
  const int32_t kps = kernel_page_size(s);
  for (const Backend* b : {planner_, executor_}) {
    if (!b) continue;
    if (Support sup = b->supports(s); !sup.ok) return sup;
  }
  for (const auto* a : {ext_planner_.get(), ext_executor_.get()}) {
    if (!a) continue;
    if (Support sup = a->spec().supports(s, kps); !sup.ok) return sup;
  }
  return {};
}

std::vector<std::string> PairBackend::replay_flags() const {
  std::vector<std::string> flags;
  double timeout = 0;
  for (const auto* a : {ext_planner_.get(), ext_executor_.get()}) {
    if (!a) continue;
    flags.insert(flags.end(), {"--adapter", a->spec().command});
    timeout = std::max(timeout, a->timeout());
  }
  // A hang replays only with the timeout it was found with.
  if (timeout > 0 && timeout != AdapterOptionsDefaults::kTimeout) {
    std::ostringstream t;
    t << timeout;
    flags.insert(flags.end(), {"--adapter-timeout", t.str()});
  }
  return flags;
}

std::unique_ptr<Plan> PairBackend::plan(const PlanInput& in) const {
  if (planner_) return planner_->plan(in);
  std::unique_ptr<Plan> plan;
  ext_planner_->call(
      "plan", [&](const std::string& dir) { write_plan_request(dir, in); },
      [&](const std::string& dir, const nlohmann::json& answer) {
        plan = read_plan_answer(dir + "/plan", *family_);
        plan->plan_run = read_plan_run(answer);
      });
  return plan;
}

void PairBackend::run(const Plan& plan, const RunInput& in, RunOutput& out) const {
  if (executor_) return executor_->run(plan, in, out);
  std::vector<RunInput> inputs{in};
  std::vector<RunOutput> outputs{std::move(out)};
  run_many(plan, inputs, outputs);
  out = std::move(outputs[0]);
}

void PairBackend::run_many(const Plan& plan, const std::vector<RunInput>& inputs, std::vector<RunOutput>& outputs) const {
  if (executor_) return Backend::run_many(plan, inputs, outputs);
  store_step_kv(inputs);
  const std::vector<std::string> names = value_set_names(inputs.size());
  const std::string variant = kernel_variant(inputs[0].scenario);
  // The kernel's own figures for this request (PROTOCOL.md "precision"), for each value set.
  auto answered = [&](const nlohmann::json& answer, std::vector<RunOutput>& outs) {
    std::optional<KernelRounding> r;
    if (answer.contains("precision"))
      r = answered_rounding(answer["precision"], rounding(), "adapter '" + ext_executor_->spec().command + "'");
    for (RunOutput& o : outs) o.rounding = r;
  };
  bool alone = false;
  if (ext_executor_->batches()) {
    if (const std::string key = batch_key(*family_, plan, inputs, model_variant(inputs[0].scenario)); !key.empty()) {
      BatchMember me;
      me.pool_elements = pool_elements(inputs);
      me.runs = inputs.size();
      me.plan = &plan;
      me.inputs = &inputs;
      me.outputs = &outputs;
      const BatchSlot::Outcome outcome = ext_executor_->call_batched(
          key, me,
          [&](const std::string& dir, const std::vector<BatchSlot*>& members) { write_batch(dir, *family_, members); },
          [&](const std::string& dir, const nlohmann::json& answer, const std::vector<BatchSlot*>& members) {
            read_batch(dir, members);
            for (BatchSlot* m : members) answered(answer, *static_cast<BatchMember*>(m)->outputs);
          },
          variant);
      if (outcome == BatchSlot::Outcome::answered) return;
      alone = outcome == BatchSlot::Outcome::alone;  // the batch failed: this case alone says if it was its own
    }
  }
  ext_executor_->call(
      "execute", [&](const std::string& dir) { write_execute_request(dir, *family_, plan, inputs, names); },
      [&](const std::string& dir, const nlohmann::json& answer) {
        for (size_t i = 0; i < inputs.size(); ++i) read_outputs(dir + "/" + names[i], inputs[i], outputs[i]);
        answered(answer, outputs);
      },
      variant, alone);
}

std::vector<size_t> PairBackend::cold_servers(const Scenario& s) const {
  std::vector<size_t> cold;
  if (!ext_executor_) return cold;
  const std::string variant = kernel_variant(s);
  for (size_t i = 0; i < ext_executor_->server_count(); ++i)
    if (ext_executor_->wants_warm_up(i, variant)) cold.push_back(i);
  // idlest first (as they stand now): warm-ups of other variants may be building on the others
  std::vector<std::pair<std::pair<bool, int>, size_t>> by;
  for (const size_t i : cold) by.push_back({ext_executor_->busyness(i), i});
  std::stable_sort(by.begin(), by.end());
  for (size_t j = 0; j < by.size(); ++j) cold[j] = by[j].second;
  return cold;
}

bool PairBackend::warm_up(const Plan& plan, const RunInput& in, size_t server) const {
  const std::vector<RunInput> inputs{in};
  store_step_kv(inputs);
  return ext_executor_->warm_up(server, kernel_variant(in.scenario), [&](const std::string& dir) {
    write_execute_request(dir, *family_, plan, inputs, {"main"});
  });
}

}  // namespace kvfuzz
