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

// Rows [n][kv_heads][dim] of a pool, one per slot, as float32: what the cache stores, so the
// pool's row over its fp8 scale (exact: the row is stored * scale, kv_pools.h).
NpyArray pool_rows(const KvPool& p, Tensor t, std::span<const int64_t> slots, int64_t count) {
  const float scale = t == Tensor::k || p.mla ? p.k_scale : p.v_scale;
  const int64_t width = t == Tensor::k ? p.k_width() : p.v_width();
  const int32_t dim = t == Tensor::k ? p.head_dim : p.v_head_dim;
  NpyArray a{npy_descr<float>(), {count, p.kv_heads, dim}, {}};
  a.bytes.resize(static_cast<size_t>(count * width) * sizeof(float));
  auto* out = reinterpret_cast<float*>(a.bytes.data());
  for (int64_t i = 0; i < count; ++i) {
    const int64_t slot = slots.empty() ? i : slots[static_cast<size_t>(i)];
    const float* row = t == Tensor::k ? p.k_slot(slot) : p.v_slot(slot);
    if (scale == 1.0f) std::copy(row, row + width, out + i * width);
    else std::transform(row, row + width, out + i * width, [scale](float x) { return x / scale; });
  }
  return a;
}

// Layer l's K or V pool of one value set: dense, or sparse above kSparsePoolElements.
void put_pool(const std::string& sub, int32_t l, const KvPool& p, Tensor t, int64_t sparse_above,
              nlohmann::json& index) {
  const std::string name = std::string(t == Tensor::k ? "k_cache." : "v_cache.") + std::to_string(l);
  if (p.dense_elements() <= sparse_above) {
    put(sub, name, pool_rows(p, t, {}, p.num_slots), index);
    return;
  }
  const std::vector<int64_t> slots = p.stored_slots();
  const std::span<const float> fill = t == Tensor::k ? p.k_fill() : p.v_fill();
  const int32_t dim = t == Tensor::k ? p.head_dim : p.v_head_dim;
  nlohmann::json parts = nlohmann::json::object();
  put(sub, name + ".slots", vec(slots), parts);
  put(sub, name + ".rows", pool_rows(p, t, slots, static_cast<int64_t>(slots.size())), parts);
  std::vector<float> stored(fill.begin(), fill.end());
  for (float& x : stored) x /= t == Tensor::k || p.mla ? p.k_scale : p.v_scale;
  put(sub, name + ".fill", NpyArray::of<float>({p.kv_heads, dim}, stored.data(), stored.size()), parts);
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

// One execute request for cases laid end to end (one case: as it is): set j of the request holds
// every case's inputs[j], tokens after tokens and each layer's pool slots after slots.
// Value set j of a case in a batch: a case with fewer sets than the batch's runs its last one
// again there (the answer is not read: read_batched_outputs), so cases whose probe sets differ in
// number still share one request.
const RunInput& set_of(const std::vector<RunInput>& c, size_t j) { return c[std::min(j, c.size() - 1)]; }

void write_cases(const std::string& dir, const Family& family, const Plan& plan,
                 const std::vector<const std::vector<RunInput>*>& cases, const std::vector<std::string>& set_names,
                 int64_t sparse_above) {
  const RunInput& first = cases.front()->front();
  const Scenario& s = first.scenario;
  const Model& m = s.model;
  ArraySet set;
  family.write(plan, set);
  nlohmann::json arrays = nlohmann::json::object();
  for (const auto& [name, a] : set.arrays) put(dir, name, a, arrays);
  const auto L = static_cast<int64_t>(m.layers.size());
  nlohmann::json manifest = case_manifest(s, first.cache, first.batch);
  int64_t T = 0;
  if (cases.size() > 1) {
    nlohmann::json& b = manifest["batch"];
    int64_t full = 0, swa = 0, bs = 0, padded = 0, seq_lens = 0;
    for (const auto* c : cases) {
      const RunInput& in = c->front();
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
    b["batched_cases"] = cases.size();
  }
  for (const auto* c : cases) T += c->front().batch.num_tokens();
  manifest["num_tokens"] = T;
  // Layer l's slab of each case's [layers][tokens][heads][dim] tensor, one after the other.
  auto tokens = [&](size_t j, const std::vector<float>& (BatchTensors::*data)() const, int32_t heads, int32_t dim) {
    NpyArray a{npy_descr<float>(), {L, T, heads, dim}, {}};
    a.bytes.resize(static_cast<size_t>(L * T * heads * dim) * sizeof(float));
    auto* out = reinterpret_cast<float*>(a.bytes.data());
    for (int64_t l = 0; l < L; ++l)
      for (const auto* c : cases) {
        const RunInput& in = set_of(*c, j);
        const int64_t slab = in.batch.num_tokens() * heads * dim;
        const float* from = (in.tensors.*data)().data() + l * slab;
        out = std::copy(from, from + slab, out);
      }
    return a;
  };
  nlohmann::json sets = nlohmann::json::object();
  for (size_t j = 0; j < set_names.size(); ++j) {
    const std::string sub = dir + "/" + set_names[j];
    std::filesystem::create_directories(sub);
    nlohmann::json index = nlohmann::json::object();
    put(sub, "q", tokens(j, &BatchTensors::q_data, m.q_heads, m.head_dim), index);
    put(sub, "k_new", tokens(j, &BatchTensors::k_data, m.kv_heads, m.head_dim), index);
    put(sub, "v_new", tokens(j, &BatchTensors::v_data, m.kv_heads, m.v_head_dim), index);
    for (int32_t l = 0; l < L; ++l) {
      if (cases.size() == 1) {
        const KvPool& p = set_of(*cases.front(), j).pools.layer(l);
        put_pool(sub, l, p, Tensor::k, sparse_above, index);
        if (!m.mla) put_pool(sub, l, p, Tensor::v, sparse_above, index);
        continue;
      }
      for (Tensor t : {Tensor::k, Tensor::v}) {
        if (t == Tensor::v && m.mla) continue;
        std::vector<NpyArray> parts;
        for (const auto* c : cases) {
          const KvPool& p = set_of(*c, j).pools.layer(l);
          parts.push_back(pool_rows(p, t, {}, p.num_slots));
        }
        NpyArray all = parts.front();
        all.shape[0] = 0;
        all.bytes.clear();
        for (const NpyArray& part : parts) {
          all.shape[0] += part.shape[0];
          all.bytes.insert(all.bytes.end(), part.bytes.begin(), part.bytes.end());
        }
        put(sub, std::string(t == Tensor::k ? "k_cache." : "v_cache.") + std::to_string(l), all, index);
      }
    }
    // The fp8 scales the kernel reads this set's pools by (PROTOCOL.md), only where one is not 1:
    // the same for every case of a batch (pair_backend.cc's model_variant).
    nlohmann::json k_scales = nlohmann::json::array(), v_scales = nlohmann::json::array();
    bool scaled = false;
    for (int32_t l = 0; l < L; ++l) {
      const KvPool& p = set_of(*cases.front(), j).pools.layer(l);
      k_scales.push_back(p.k_scale);
      v_scales.push_back(p.v_scale);
      scaled = scaled || p.k_scale != 1.0f || p.v_scale != 1.0f;
    }
    if (scaled) index["kv_scales"] = {{"k", k_scales}, {"v", v_scales}};
    sets[set_names[j]] = index;
  }
  write_json(dir + "/manifest.json", {{"op", "execute"},
                                      {"family", family.name},
                                      {"case", manifest},
                                      {"plan", set.meta},
                                      {"arrays", arrays},
                                      {"sets", sets},
                                      {"outputs",
                                       {{"out", {{"dtype", "<f4"}, {"shape", {L, T, m.q_heads, m.v_head_dim}}}},
                                        {"lse", {{"dtype", "<f4"}, {"shape", {L, T, m.q_heads}}}}}}});
}

}  // namespace

void write_execute_request(const std::string& dir, const Family& family, const Plan& plan,
                           const std::vector<RunInput>& inputs, const std::vector<std::string>& set_names,
                           int64_t sparse_above) {
  write_cases(dir, family, plan, {&inputs}, set_names, sparse_above);
}

std::vector<std::string> value_set_names(size_t sets) {
  std::vector<std::string> names;
  for (size_t i = 0; i < sets; ++i) names.push_back(i == 0 ? "main" : "set" + std::to_string(i));
  return names;
}

void write_batched_execute_request(const std::string& dir, const Family& family, const Plan& plan,
                                   const std::vector<const std::vector<RunInput>*>& cases,
                                   const std::vector<std::string>& set_names) {
  write_cases(dir, family, plan, cases, set_names, kSparsePoolElements);
}

void read_batched_outputs(const std::string& dir, const std::vector<const std::vector<RunInput>*>& cases,
                          const std::vector<RunOutput*>& outputs) {
  const Model& m = cases.front()->front().scenario.model;
  const auto L = static_cast<int64_t>(m.layers.size());
  int64_t T = 0;
  for (const auto* c : cases) T += c->front().batch.num_tokens();
  const std::vector<float> out = read_float(dir + "/out.npy", {L, T, m.q_heads, m.v_head_dim});
  const std::vector<float> lse = read_float(dir + "/lse.npy", {L, T, m.q_heads});
  // Case i's tokens of layer l: rows [offset_i, offset_i + T_i) of the layer's [T] rows.
  int64_t offset = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const int64_t t = cases[i]->front().batch.num_tokens();
    if (!outputs[i]) {  // a case with fewer value sets than the batch: this set is not its own
      offset += t;
      continue;
    }
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
