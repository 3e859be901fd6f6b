// What a kvfuzz backend is: a planner that builds production metadata and an executor that runs
// attention from that metadata alone.
//
// Where it sits: forward batch -> **plan** (host metadata, a Plan) -> **run** (executor) ->
// outputs + read log -> properties. A planner may read the forward batch, the cache's
// req_to_token, full_to_swa and the model config — what a production backend sees — and nothing
// of the oracle. An executor may read only its Plan, the pools and the batch tensors; every index
// goes through a checked accessor. CUDA-graph batches (ForwardBatch::graph()) are planned the
// production way: buffers allocated once at worst-case capacity for the captured size, then
// filled by replay.
//
// Adding a backend: a folder under backends/ with a class implementing Backend, and one line in
// registry.cc.
//
//   const Backend& b = *find_backend("fa");
//   if (Support s = b.supports(scenario); !s.ok) report_unsupported(s.why);
//   auto plan = b.plan({scenario, cache, batch, faults});
//   b.run(*plan, {scenario, cache, batch, pools, tensors}, out);
#pragma once

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/common/batch_tensors.h"
#include "backends/common/kv_pools.h"
#include "backends/common/read_log.h"
#include "backends/metadata_checker.h"
#include "reference/forward_batch.h"
#include "reference/scenario.h"

namespace kvfuzz {

struct Support {
  bool ok = true;
  std::string why;  // when not ok: what the backend cannot run, for the report
  static Support no(std::string why) { return {false, std::move(why)}; }
};

// A named planner bug a user switches on to measure the suite's power (kvfuzz faults).
struct FaultInfo {
  std::string name;
  std::string description;  // what goes wrong and which production fix it reproduces
  // The size profile whose workloads reach it (kvfuzz faults draws its cases there); "": the
  // default profiles. E.g. "gpt-oss": only its models carry attention sinks.
  std::string profile = "";
};

struct PlanInput {
  const Scenario& scenario;
  const CacheState& cache;
  const ForwardBatch& batch;
  const std::vector<std::string>& faults;  // names from Backend::faults(); usually empty

  bool fault(std::string_view name) const { return std::find(faults.begin(), faults.end(), name) != faults.end(); }
};

// An argument the engine fixed at a plan step (FlashInfer's plan(), FA3's ahead-of-time scheduler,
// a CUDA graph's capture) and passed differently at the run step (forward(), the kernel call, the
// replay): what an external planner saw its engine do (PROTOCOL.md "plan_run"); the property
// harness reports each as a `plan-run` finding whose mechanism names the argument.
struct PlanRunDisagreement {
  std::string argument;  // "window_left", "logits_soft_cap", "cu_seqlens_q", ...
  int32_t layer = -1;    // the layer whose call disagreed; -1: not one layer's
  std::string message;   // what the plan fixed and what the run passed, for a person
};

// A backend's metadata. Concrete plans are plain structs of Buffers.
class Plan {
 public:
  virtual ~Plan() = default;
  // Plan-run disagreements an external planner reported with this plan (empty for built-in ones).
  std::vector<PlanRunDisagreement> plan_run;
  // The metadata's own invariants (stride/divide, extents, prefix sums, maxima), reported through
  // the checker's shared helpers.
  virtual void check_metadata(MetadataChecker& check) const = 0;
  // Throws Violation if any buffer's guard zone was overwritten.
  virtual void check_guards() const = 0;
  // Whether partial results are merged where the batch says so (vLLM's cascade over the batch's
  // common prefix): a request's output then differs by rounding with the other requests, so
  // metamorphic variants that change the batch compare it within tolerance, not bitwise.
  virtual bool merges_by_batch() const { return false; }
  // The ranks its calls are sharded over by vLLM's decode-context parallelism (FaGroup::dcp_world,
  // --decode-context-parallel-size); 1: none. The property harness copies it onto the plan's findings
  // (Finding::dcp_world), whose fingerprints carry it for known issues to match on.
  virtual int32_t dcp_world() const { return 1; }
};

struct RunInput {
  const Scenario& scenario;
  const CacheState& cache;
  const ForwardBatch& batch;
  KvPools& pools;              // the executor writes the step's new K/V, then reads
  const BatchTensors& tensors;
  // Set by `kvfuzz explain`: a read outside its pool is recorded here and skipped instead of
  // ending the run, so the picture can show every wrong read.
  std::vector<std::string>* lenient = nullptr;
};

// Where a kernel rounds the products q_i k_i of a logit: not at all (fp32 sums of exact products),
// to the cache dtype, or to the cache dtype on MHA layers only (sglang's Triton decode kernels:
// the MHA kernel multiplies elementwise in the cache dtype, the grouped one uses tl.dot).
enum class QkProducts : uint8_t { fp32, cache, cache_mha };

// An executor's arithmetic as it declares it (properties/tolerance.h turns it into a bound).
struct KernelRounding {
  std::optional<DType> p_dtype;   // P rounded to this before P.V; nullopt: the case's cache dtype
  std::optional<DType> out_dtype = DType::fp32;  // the dtype of its outputs; nullopt: the case's cache dtype
  int32_t extra_merges = 0;       // LSE merges beyond kvfuzz's (kv_splits + 4): a kernel's own splits
  int32_t tile_keys = 0;          // fewest keys per softmax tile; 0: kvfuzz's tile
  int32_t split_keys = 0;         // fewest keys per split-KV partition of its own; 0: none beyond extra_merges
  bool row_sum_rounded = false;   // the row sum adds P as rounded to p_dtype (FlashInfer's fa2 MMA row sum)
  QkProducts qk_products = QkProducts::fp32;  // where each q_i k_i is rounded before the logit's sum
};

struct RunOutput {
  int32_t layers = 0;
  int64_t num_tokens = 0;  // ForwardBatch::num_tokens(), padded rows included
  int32_t q_heads = 0, v_head_dim = 0;
  std::vector<float> out;  // [layers][num_tokens][q_heads][v_head_dim]
  std::vector<float> lse;  // [layers][num_tokens][q_heads], natural log
  ReadLog reads;
  // This run's arithmetic where the kernel picks it by the case (tiles, split-KV partitions; an
  // external executor's answer "precision"); nullopt: the backend's rounding().
  std::optional<KernelRounding> rounding;

  RunOutput() = default;
  RunOutput(const Scenario& s, const ForwardBatch& fb)
      : layers(static_cast<int32_t>(s.model.layers.size())),
        num_tokens(fb.num_tokens()),
        q_heads(s.model.q_heads),
        v_head_dim(s.model.v_head_dim),
        out(static_cast<size_t>(layers * num_tokens * q_heads * v_head_dim), 0.0f),
        lse(static_cast<size_t>(layers * num_tokens * q_heads), 0.0f),
        reads(layers, num_tokens) {}

  float* out_at(int32_t layer, int64_t token, int32_t head) {
    return out.data() + ((static_cast<size_t>(layer) * num_tokens + token) * q_heads + head) * v_head_dim;
  }
  const float* out_at(int32_t layer, int64_t token, int32_t head) const {
    return out.data() + ((static_cast<size_t>(layer) * num_tokens + token) * q_heads + head) * v_head_dim;
  }
  float& lse_at(int32_t layer, int64_t token, int32_t head) {
    return lse[(static_cast<size_t>(layer) * num_tokens + token) * q_heads + head];
  }
  float lse_at(int32_t layer, int64_t token, int32_t head) const {
    return lse[(static_cast<size_t>(layer) * num_tokens + token) * q_heads + head];
  }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // One paragraph for `kvfuzz backends`: modes, layer kinds, features, metadata style.
  virtual std::string_view summary() const = 0;
  // The metadata family it plans and executes (backends/contract/families.h).
  virtual std::string_view family() const = 0;
  virtual Support supports(const Scenario& s) const = 0;
  // The page size of the metadata it plans (sglang plans FlashInfer at 1 whatever the cache's).
  virtual int32_t kernel_page_size(const Scenario& s) const { return s.cache.page_size; }
  // Whether run() records the keys it reads (kvfuzz's checked executors do; an external one is
  // opaque and its read set is recovered from probe runs, properties/opaque_extent.h).
  virtual bool records_reads() const { return true; }
  // How its executor rounds, for the oracle's error bound (properties/tolerance.h) and the probe
  // codes (properties/opaque_extent.h). The default is kvfuzz's CPU executors.
  virtual KernelRounding rounding() const { return {}; }
  // Runs several value sets over one plan (probe runs of opaque executors); an external executor
  // sends them in one round trip.
  virtual void run_many(const Plan& plan, const std::vector<RunInput>& inputs, std::vector<RunOutput>& outputs) const {
    for (size_t i = 0; i < inputs.size(); ++i) run(plan, inputs[i], outputs[i]);
  }
  virtual std::vector<FaultInfo> faults() const { return {}; }
  // Command-line flags a replay line needs to find this backend again ("--adapter CMD").
  virtual std::vector<std::string> replay_flags() const { return {}; }
  virtual std::unique_ptr<Plan> plan(const PlanInput& in) const = 0;
  virtual void run(const Plan& plan, const RunInput& in, RunOutput& out) const = 0;
};

// What a check of `s` on `b` can run: what b declares (supports), and shared prefixes (share ops)
// only where b's reads are recorded: the probe sets that recover an opaque kernel's reads
// (properties/opaque_extent.h) name one request per slot. Campaigns draw within it
// (fuzz/case_draw.h), so an opaque executor is not sent cases it must refuse.
//   if (Support r = runnable(b, scenario); !r.ok) report_unsupported(r.why);
inline Support runnable(const Backend& b, const Scenario& s) {
  Support declared = b.supports(s);
  if (!declared.ok || b.records_reads()) return declared;
  if (std::any_of(s.history.begin(), s.history.end(), [](const Op& op) { return op.kind == OpKind::share; }))
    return Support::no(
        "shared prefixes (share ops) need an executor whose reads are recorded: the probe sets "
        "that recover an opaque kernel's reads (opaque_extent.h) name one request per slot");
  return declared;
}

}  // namespace kvfuzz
