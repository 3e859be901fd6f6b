#include "backends/external/exchange.h"

#include <filesystem>
#include <fstream>
#include <span>

#include "backends/contract/npy.h"
#include "reference/io.h"
#include "reference/scenario_json.h"

namespace kvfuzz {
namespace {

nlohmann::json describe(const NpyArray& a) { return {{"dtype", a.descr}, {"shape", a.shape}}; }

void put(const std::string& dir, const std::string& name, const NpyArray& a, nlohmann::json& index) {
  write_npy(dir + "/" + name + ".npy", a);
  index[name] = describe(a);
}

void write_json(const std::string& path, const nlohmann::json& j) { write_file_atomic(path, j.dump(1)); }

template <class T>
NpyArray vec(const std::vector<T>& v) {
  return NpyArray::of<T>({static_cast<int64_t>(v.size())}, v);
}

std::vector<float> read_float(const std::string& path, const std::vector<int64_t>& shape) {
  const NpyArray a = read_npy(path);
  if (a.shape != shape) {
    auto str = [](const std::vector<int64_t>& s) {
      std::string o = "[";
      for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
      return o + "]";
    };
    throw ContractError(path + ": shape " + str(a.shape) + ", expected " + str(shape));
  }
  return a.as_float(path);
}

// Appends rows [n][kv_heads][dim] of a pool, one per slot (`slots`, or 0..count-1 where empty), as
// float32: what the cache stores, so the pool's row over its fp8 scale (exact: the row is stored *
// scale, kv_pools.h). Rows that lie one after the other in the pool's memory (a block's slots) go
// as one piece.
void append_pool_rows(NpyWriter& w, const KvPool& p, Tensor t, std::span<const int64_t> slots, int64_t count) {
  const float scale = t == Tensor::k || p.mla ? p.k_scale : p.v_scale;
  const int64_t width = t == Tensor::k ? p.k_width() : p.v_width();
  const auto row_bytes = static_cast<size_t>(width) * sizeof(float);
  std::vector<float> scaled;
  const float* run = nullptr;  // rows [run, run + run_rows * width) not yet appended
  size_t run_rows = 0;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t slot = slots.empty() ? i : slots[static_cast<size_t>(i)];
    const float* row = t == Tensor::k ? p.k_slot(slot) : p.v_slot(slot);
    if (scale != 1.0f) {
      scaled.resize(static_cast<size_t>(width));
      std::transform(row, row + width, scaled.begin(), [scale](float x) { return x / scale; });
      w.append(scaled.data(), row_bytes);
      continue;
    }
    if (run && row == run + static_cast<int64_t>(run_rows) * width) {
      ++run_rows;
      continue;
    }
    if (run) w.append(run, run_rows * row_bytes);
    run = row;
    run_rows = 1;
  }
  if (run) w.append(run, run_rows * row_bytes);
}

// `sub`/`name`.npy of float32 rows [n][kv_heads][dim], written by `rows(writer)`, described in `index`.
template <class Rows>
void put_rows(const std::string& sub, const std::string& name, std::vector<int64_t> shape, nlohmann::json& index,
              Rows rows) {
  NpyWriter w(sub + "/" + name + ".npy", npy_descr<float>(), shape);
  rows(w);
  w.finish();
  index[name] = {{"dtype", npy_descr<float>()}, {"shape", shape}};
}

// Layer l's K or V pool of one value set: dense, or sparse above kSparsePoolElements.
void put_pool(const std::string& sub, int32_t l, const KvPool& p, Tensor t, int64_t sparse_above,
              nlohmann::json& index) {
  const std::string name = std::string(t == Tensor::k ? "k_cache." : "v_cache.") + std::to_string(l);
  const int32_t dim = t == Tensor::k ? p.head_dim : p.v_head_dim;
  if (p.dense_elements() <= sparse_above) {
    put_rows(sub, name, {p.num_slots, p.kv_heads, dim}, index,
             [&](NpyWriter& w) { append_pool_rows(w, p, t, {}, p.num_slots); });
    return;
  }
  const std::vector<int64_t> slots = p.stored_slots();
  const std::span<const float> fill = t == Tensor::k ? p.k_fill() : p.v_fill();
  nlohmann::json parts = nlohmann::json::object();
  put(sub, name + ".slots", vec(slots), parts);
  const auto stored = static_cast<int64_t>(slots.size());
  put_rows(sub, name + ".rows", {stored, p.kv_heads, dim}, parts,
           [&](NpyWriter& w) { append_pool_rows(w, p, t, slots, stored); });
  std::vector<float> fill_stored(fill.begin(), fill.end());
  for (float& x : fill_stored) x /= t == Tensor::k || p.mla ? p.k_scale : p.v_scale;
  put(sub, name + ".fill", NpyArray::of<float>({p.kv_heads, dim}, fill_stored.data(), fill_stored.size()), parts);
  index[name] = {{"dtype", npy_descr<float>()},
                 {"shape", {p.num_slots, p.kv_heads, dim}},
                 {"sparse", true},
                 {"num_slots", p.num_slots},
                 {"parts", parts}};
}

}  // namespace

nlohmann::json case_manifest(const Scenario& s, const CacheState& cache, const ForwardBatch& fb) {
  const Model& m = s.model;
  nlohmann::json layers = nlohmann::json::array();
  for (int32_t l = 0; l < static_cast<int32_t>(m.layers.size()); ++l) {
    const Layer& layer = m.layers[static_cast<size_t>(l)];
    layers.push_back({{"kind", to_string(layer.kind)},
                      {"window", layer.window},
                      {"chunk", layer.chunk},
                      {"pool", pool_of(s, l) == PoolKind::swa ? "swa" : "full"}});
    // the layer's fp8 scales where not 1 (a checkpoint's k_scale / v_scale: what a planner builds
    // its layers with, vLLM's layer._k_scale), the same the value sets' kv_scales carry
    if (layer.scaled()) {
      layers.back()["k_scale"] = layer.k_scale;
      layers.back()["v_scale"] = layer.v_scale;
    }
  }
  nlohmann::json j = {{"contract_version", kContractVersion},
          {"model",
           {{"q_heads", m.q_heads},
            {"kv_heads", m.kv_heads},
            {"head_dim", m.head_dim},
            {"v_head_dim", m.v_head_dim},
            {"mla", m.mla},
            {"sm_scale", m.sm_scale},
            {"softcap", m.softcap},
            {"layers", layers}}},
          {"dtype", std::string(to_string(s.values.dtype))},
          {"page_size", s.cache.page_size},
          {"num_tokens", fb.num_tokens()},
          {"pools", {{"full_slots", cache.full_slots}, {"swa_slots", cache.swa_slots}}},
          {"batch",
           {{"mode", to_string(fb.mode)},
            {"bs", fb.bs},
            {"padded_bs", fb.padded_bs},
            {"captured", fb.captured},
            {"topk", fb.topk},
            {"draft_tokens", fb.draft_tokens},
            {"draft_steps", fb.draft_steps},
            {"draft_step", fb.draft_step},
            {"kv_splits", fb.kv_splits},
            {"device_sms", fb.device_sms},
            {"seq_lens_sum", fb.seq_lens_sum}}}};
  if (!m.sinks.empty()) j["model"]["sinks"] = m.sinks;  // [q_heads]: written only where the model has sinks
  return j;
}

namespace {

// One execute request: value set j (set_names[j]) holds the runs sets[j] laid end to end, tokens
// after tokens and each layer's pool slots after slots (one run: as it is). Every set has as many
// runs, of the same shapes; the manifest's counts are its first set's.
using RequestSets = std::vector<std::vector<const RunInput*>>;

void write_sets(const std::string& dir, const Family& family, const Plan& plan, const RequestSets& sets,
                 const std::vector<std::string>& set_names, int64_t sparse_above) {
  const std::vector<const RunInput*>& runs = sets.front();
  const RunInput& first = *runs.front();
  const Scenario& s = first.scenario;
  const Model& m = s.model;
  ArraySet set;
  family.write(plan, set);
  nlohmann::json arrays = nlohmann::json::object();
  for (const auto& [name, a] : set.arrays) put(dir, name, a, arrays);
  const auto L = static_cast<int64_t>(m.layers.size());
  nlohmann::json manifest = case_manifest(s, first.cache, first.batch);
  int64_t T = 0;
  if (runs.size() > 1) {
    nlohmann::json& b = manifest["batch"];
    int64_t full = 0, swa = 0, bs = 0, padded = 0, seq_lens = 0;
    for (const RunInput* run : runs) {
      const RunInput& in = *run;
      full += in.cache.full_slots;
      swa += in.cache.swa_slots;
      bs += in.batch.bs;
      padded += in.batch.padded_bs;
      seq_lens += in.batch.seq_lens_sum;
    }
    manifest["pools"] = {{"full_slots", full}, {"swa_slots", swa}};
    b["bs"] = bs;
    b["padded_bs"] = padded;
    b["seq_lens_sum"] = seq_lens;
    b["batched_runs"] = runs.size();
  }
  for (const RunInput* run : runs) T += run->batch.num_tokens();
  manifest["num_tokens"] = T;
  // Layer l's slab of each case's [layers][tokens][heads][dim] tensor, one after the other.
  auto put_tokens = [&](const std::string& sub, const char* name, size_t j,
                        const std::vector<float>& (BatchTensors::*data)() const, int32_t heads, int32_t dim,
                        nlohmann::json& index) {
    put_rows(sub, name, {L, T, heads, dim}, index, [&](NpyWriter& w) {
      for (int64_t l = 0; l < L; ++l)
        for (const RunInput* run : sets[j]) {
          const RunInput& in = *run;
          const int64_t slab = in.batch.num_tokens() * heads * dim;
          w.append((in.tensors.*data)().data() + l * slab, static_cast<size_t>(slab) * sizeof(float));
        }
    });
  };
  nlohmann::json set_index = nlohmann::json::object();
  for (size_t j = 0; j < set_names.size(); ++j) {
    const std::string sub = dir + "/" + set_names[j];
    std::filesystem::create_directories(sub);
    // a reused request folder (adapter.cc) may hold an earlier request's answer: marked, so that
    // an adapter that writes none is read as writing none
    for (const char* output : {"/out.npy", "/lse.npy"}) mark_npy_unwritten(sub + output);
    nlohmann::json index = nlohmann::json::object();
    put_tokens(sub, "q", j, &BatchTensors::q_data, m.q_heads, m.head_dim, index);
    put_tokens(sub, "k_new", j, &BatchTensors::k_data, m.kv_heads, m.head_dim, index);
    put_tokens(sub, "v_new", j, &BatchTensors::v_data, m.kv_heads, m.v_head_dim, index);
    for (int32_t l = 0; l < L; ++l) {
      if (sets[j].size() == 1) {
        const KvPool& p = sets[j].front()->pools.layer(l);
        put_pool(sub, l, p, Tensor::k, sparse_above, index);
        if (!m.mla) put_pool(sub, l, p, Tensor::v, sparse_above, index);
        continue;
      }
      for (Tensor t : {Tensor::k, Tensor::v}) {
        if (t == Tensor::v && m.mla) continue;
        const KvPool& first_pool = sets[j].front()->pools.layer(l);
        int64_t slots = 0;
        for (const RunInput* run : sets[j]) slots += run->pools.layer(l).num_slots;
        const int32_t dim = t == Tensor::k ? first_pool.head_dim : first_pool.v_head_dim;
        put_rows(sub, std::string(t == Tensor::k ? "k_cache." : "v_cache.") + std::to_string(l),
                 {slots, first_pool.kv_heads, dim}, index, [&](NpyWriter& w) {
                   for (const RunInput* run : sets[j]) {
                     const KvPool& p = run->pools.layer(l);
                     append_pool_rows(w, p, t, {}, p.num_slots);
                   }
                 });
      }
    }
    // The fp8 scales the kernel reads this set's pools by (PROTOCOL.md), only where one is not 1:
    // the same for every case of a batch (pair_backend.cc's model_variant).
    nlohmann::json k_scales = nlohmann::json::array(), v_scales = nlohmann::json::array();
    bool scaled = false;
    for (int32_t l = 0; l < L; ++l) {
      const KvPool& p = sets[j].front()->pools.layer(l);
      k_scales.push_back(p.k_scale);
      v_scales.push_back(p.v_scale);
      scaled = scaled || p.k_scale != 1.0f || p.v_scale != 1.0f;
    }
    if (scaled) index["kv_scales"] = {{"k", k_scales}, {"v", v_scales}};
    set_index[set_names[j]] = index;
  }
  write_json(dir + "/manifest.json", {{"op", "execute"},
                                      {"family", family.name},
                                      {"case", manifest},
                                      {"plan", set.meta},
                                      {"arrays", arrays},
                                      {"sets", set_index},
                                      {"outputs",
                                       {{"out", {{"dtype", "<f4"}, {"shape", {L, T, m.q_heads, m.v_head_dim}}}},
                                        {"lse", {{"dtype", "<f4"}, {"shape", {L, T, m.q_heads}}}}}}});
}

}  // namespace

void write_execute_request(const std::string& dir, const Family& family, const Plan& plan,
                           const std::vector<RunInput>& inputs, const std::vector<std::string>& set_names,
                           int64_t sparse_above) {
  RequestSets sets;
  for (const RunInput& in : inputs) sets.push_back({&in});
  write_sets(dir, family, plan, sets, set_names, sparse_above);
}

std::vector<std::string> value_set_names(size_t sets) {
  std::vector<std::string> names;
  for (size_t i = 0; i < sets; ++i) names.push_back(i == 0 ? "main" : "set" + std::to_string(i));
  return names;
}

void write_batched_execute_request(const std::string& dir, const Family& family, const Plan& plan,
                                   const std::vector<const RunInput*>& runs) {
  write_sets(dir, family, plan, {runs}, value_set_names(1), kSparsePoolElements);
}

void read_batched_outputs(const std::string& dir, const std::vector<const RunInput*>& runs,
                          const std::vector<RunOutput*>& outputs) {
  const Model& m = runs.front()->scenario.model;
  const auto L = static_cast<int64_t>(m.layers.size());
  int64_t T = 0;
  for (const RunInput* run : runs) T += run->batch.num_tokens();
  const std::vector<float> out = read_float(dir + "/out.npy", {L, T, m.q_heads, m.v_head_dim});
  const std::vector<float> lse = read_float(dir + "/lse.npy", {L, T, m.q_heads});
  // Run i's tokens of layer l: rows [offset_i, offset_i + T_i) of the layer's [T] rows.
  int64_t offset = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const int64_t t = runs[i]->batch.num_tokens();
    RunOutput& o = *outputs[i];
    o.out.clear();
    o.lse.clear();
    for (int64_t l = 0; l < L; ++l) {
      const int64_t o_row = int64_t{m.q_heads} * m.v_head_dim, l_row = m.q_heads;
      const auto o_from = out.begin() + (l * T + offset) * o_row;
      const auto l_from = lse.begin() + (l * T + offset) * l_row;
      o.out.insert(o.out.end(), o_from, o_from + t * o_row);
      o.lse.insert(o.lse.end(), l_from, l_from + t * l_row);
    }
    offset += t;
  }
}

void read_outputs(const std::string& dir, const RunInput& in, RunOutput& out) {
  const Model& m = in.scenario.model;
  const auto L = static_cast<int64_t>(m.layers.size());
  const int64_t T = in.batch.num_tokens();
  out.out = read_float(dir + "/out.npy", {L, T, m.q_heads, m.v_head_dim});
  out.lse = read_float(dir + "/lse.npy", {L, T, m.q_heads});
}

void write_plan_request(const std::string& dir, const PlanInput& in) {
  const CacheState& c = in.cache;
  const ForwardBatch& fb = in.batch;
  nlohmann::json arrays = nlohmann::json::object();
  put(dir, "req_to_token", NpyArray::of<int32_t>({c.config.max_requests + 1, c.config.max_context_len}, c.req_to_token), arrays);
  if (c.hybrid) put(dir, "full_to_swa", vec(c.full_to_swa), arrays);
  put(dir, "req_pool_indices", vec(fb.req_pool_indices), arrays);
  put(dir, "seq_lens", vec(fb.seq_lens), arrays);
  put(dir, "extend_prefix_lens", vec(fb.prefix_lens), arrays);
  put(dir, "extend_seq_lens", vec(fb.extend_lens), arrays);
  put(dir, "positions", vec(fb.positions), arrays);
  put(dir, "out_cache_loc", vec(fb.out_cache_loc), arrays);
  if (!fb.custom_mask.empty()) put(dir, "custom_mask", vec(fb.custom_mask), arrays);
  nlohmann::json cs = case_manifest(in.scenario, c, fb);
  cs["cache"] = {{"page_size", c.config.page_size},
                 {"max_requests", c.config.max_requests},
                 {"max_context_len", c.config.max_context_len},
                 {"hybrid", c.hybrid},
                 {"full_pages", c.config.full_pages},
                 {"swa_pages", c.config.swa_pages},
                 {"sort_free", c.config.sort_free}};
  // the request history that built this cache, as the case file writes it, and the scenario id of
  // each batch row (-1 padded): an engine's own allocator can replay it (adapters/vllm/kv_cache_manager.py)
  cs["history"] = nlohmann::json::parse(to_json(in.scenario))["history"];
  cs["batch"]["request_ids"] = fb.request_ids;
  write_json(dir + "/manifest.json", {{"op", "plan"}, {"case", cs}, {"arrays", arrays}, {"answer_dir", dir + "/plan"}});
  std::filesystem::create_directories(dir + "/plan");
}

std::unique_ptr<Plan> read_plan_answer(const std::string& dir, const Family& family) {
  ArraySet set;
  if (!std::filesystem::exists(dir + "/plan.json")) throw ContractError(dir + "/plan.json: missing (the planner wrote no plan)");
  const std::string text = read_input(dir + "/plan.json", size_t{64} << 20);
  set.meta = nlohmann::json::parse(text, nullptr, false);
  if (set.meta.is_discarded() || !set.meta.is_object()) throw ContractError(dir + "/plan.json: not a JSON object");
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (file.size() > 4 && file.ends_with(".npy")) set.arrays[file.substr(0, file.size() - 4)] = read_npy(entry.path().string());
  }
  return family.read(set);
}

std::vector<PlanRunDisagreement> read_plan_run(const nlohmann::json& answer) {
  std::vector<PlanRunDisagreement> out;
  if (!answer.contains("plan_run")) return out;
  const nlohmann::json& list = answer["plan_run"];
  if (!list.is_array()) throw ContractError("answer's plan_run: not a list");
  for (const nlohmann::json& item : list) {
    const bool well_formed = item.is_object() && item.contains("argument") && item["argument"].is_string() &&
                             !item["argument"].get<std::string>().empty() && item.contains("message") &&
                             item["message"].is_string() &&
                             (!item.contains("layer") || item["layer"].is_number_integer());
    if (!well_formed)
      throw ContractError(
          "answer's plan_run: " + item.dump().substr(0, 200) +
          " is not {\"argument\": non-empty string, \"message\": string, \"layer\": integer (optional)}");
    out.push_back({item["argument"].get<std::string>(), item.value("layer", -1), item["message"].get<std::string>()});
  }
  return out;
}

}  // namespace kvfuzz
