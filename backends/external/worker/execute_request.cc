// See execute_request.h.
#include "backends/external/worker/execute_request.h"

#include <chrono>
#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>
#include <tuple>

#include "backends/contract/npy.h"
#include "backends/external/worker/guarded_buffer.h"

namespace kvfuzz::worker {
namespace {

int32_t dtype_code(const std::string& descr, const std::string& what) {
  if (descr == "<i4") return KVFUZZ_I32;
  if (descr == "<i8") return KVFUZZ_I64;
  if (descr == "|u1" || descr == "<u1") return KVFUZZ_U8;
  if (descr == "<f2") return KVFUZZ_F16;
  if (descr == "<f4") return KVFUZZ_F32;
  if (descr == "<f8") return KVFUZZ_F64;
  throw ContractError(what + ": dtype " + descr + " has no kvfuzz_dtype");
}

// An array as the library sees it, with the guarded bytes behind it.
struct Held {
  std::string name;
  GuardedBuffer buffer;
  kvfuzz_array view{};

  Held(std::string contract_name, const std::string& label, NpyArray a)
      : name(std::move(contract_name)), buffer(label, std::move(a.bytes)) {
    if (a.shape.size() > KVFUZZ_MAX_DIMS) throw ContractError(label + ": more than " + std::to_string(KVFUZZ_MAX_DIMS) + " dimensions");
    view.name = name.c_str();
    view.dtype = dtype_code(a.descr, label);
    view.ndim = static_cast<int32_t>(a.shape.size());
    for (size_t d = 0; d < a.shape.size(); ++d) view.shape[d] = a.shape[d];
    view.data = buffer.data();
    view.bytes = buffer.size();
  }
};

using HeldList = std::vector<std::unique_ptr<Held>>;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Reads dir/name.npy into a guarded buffer, adding the time taken to *seconds.
const Held& load(HeldList& list, const std::string& dir, const std::string& name, const std::string& label,
                 double* seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  list.push_back(std::make_unique<Held>(name, label, read_npy(dir + "/" + name + ".npy")));
  *seconds += seconds_since(t0);
  return *list.back();
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ContractError(path + ": cannot be read");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<int64_t> output_shape(const nlohmann::json& manifest, const char* which, size_t ndim) {
  const auto shape = manifest.at("outputs").at(which).at("shape").get<std::vector<int64_t>>();
  if (shape.size() != ndim) throw ContractError(std::string("manifest: outputs.") + which + " must have " + std::to_string(ndim) + " dimensions");
  return shape;
}

size_t product(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

void collect(const HeldList& list, std::vector<std::string>& out) {
  for (const auto& h : list)
    for (std::string& v : h->buffer.violations()) out.push_back(std::move(v));
}

}  // namespace

ExecuteResult execute_request(const ExecutorLibrary& library, const std::string& dir) {
  const std::string manifest_text = read_text(dir + "/manifest.json");
  const nlohmann::json manifest = nlohmann::json::parse(manifest_text);
  const nlohmann::json& model = manifest.at("case").at("model");
  const auto layers = static_cast<int32_t>(model.at("layers").size());
  const bool mla = model.at("mla").get<bool>();

  for (const auto& set : manifest.at("sets").items())
    for (const auto& array : set.value().items())
      if (array.value().value("sparse", false)) {
        ExecuteResult r;
        r.unsupported = "kvfuzz-worker hands libraries dense pools; " + array.key() + " of " +
                        std::to_string(array.value().value("num_slots", int64_t{0})) +
                        " slots came sparse (PROTOCOL.md)";
        return r;
      }

  ExecuteResult result;
  HeldList metadata;  // loaded once, shared by the value sets
  std::vector<kvfuzz_array> arrays;
  for (const auto& item : manifest.at("arrays").items())
    arrays.push_back(load(metadata, dir, item.key(), "array '" + item.key() + "'", &result.read_seconds).view);

  const std::vector<int64_t> out_shape = output_shape(manifest, "out", 4), lse_shape = output_shape(manifest, "lse", 3);
  for (const auto& item : manifest.at("sets").items()) {
    const std::string set = item.key();
    const std::string folder = dir + "/" + set;
    auto label = [&](const std::string& name) { return name + " (value set " + set + ")"; };
    HeldList held;
    kvfuzz_call call{};
    call.version = KVFUZZ_EXECUTOR_VERSION;
    call.manifest_json = manifest_text.c_str();
    call.value_set = set.c_str();
    call.num_arrays = static_cast<int32_t>(arrays.size());
    call.arrays = arrays.data();
    call.num_layers = layers;
    call.q = load(held, folder, "q", label("q"), &result.read_seconds).view;
    call.k_new = load(held, folder, "k_new", label("k_new"), &result.read_seconds).view;
    call.v_new = load(held, folder, "v_new", label("v_new"), &result.read_seconds).view;
    std::vector<kvfuzz_array> k_cache, v_cache(static_cast<size_t>(layers));
    for (int32_t l = 0; l < layers; ++l) {
      const std::string k = "k_cache." + std::to_string(l), v = "v_cache." + std::to_string(l);
      k_cache.push_back(load(held, folder, k, label(k), &result.read_seconds).view);
      if (!mla) v_cache[static_cast<size_t>(l)] = load(held, folder, v, label(v), &result.read_seconds).view;
      else v_cache[static_cast<size_t>(l)].name = "v_cache";  // absent: V is the first v_head_dim of K
    }
    call.k_cache = k_cache.data();
    call.v_cache = v_cache.data();
    // NaN (all bits set) until written: an output the library leaves alone cannot pass.
    GuardedBuffer out(label("out"), product(out_shape) * sizeof(float), 0xff);
    GuardedBuffer lse(label("lse"), product(lse_shape) * sizeof(float), 0xff);
    call.out = reinterpret_cast<float*>(out.data());
    call.out_bytes = out.size();
    call.lse = reinterpret_cast<float*>(lse.data());
    call.lse_bytes = lse.size();
    for (size_t d = 0; d < 4; ++d) call.out_shape[d] = out_shape[d];
    for (size_t d = 0; d < 3; ++d) call.lse_shape[d] = lse_shape[d];
    std::vector<char> error(4096, '\0');
    call.error = error.data();
    call.error_capacity = error.size();

    const auto start = std::chrono::steady_clock::now();
    const int rc = library.run(call);
    result.seconds[set] = seconds_since(start);

    collect(metadata, result.violations);
    collect(held, result.violations);
    for (const GuardedBuffer* b : {&out, &lse})
      for (std::string& v : b->violations()) result.violations.push_back(std::move(v));
    if (!result.violations.empty()) return result;
    if (rc != 0) {
      error.back() = '\0';
      result.error = "kvfuzz_executor_run returned " + std::to_string(rc) + " on value set " + set +
                     (error[0] ? ": " + std::string(error.data()) : " (no message in call->error)");
      return result;
    }
    const auto written = std::chrono::steady_clock::now();
    for (const auto& [name, buffer, shape] :
         {std::tuple{"/out.npy", &out, &out_shape}, std::tuple{"/lse.npy", &lse, &lse_shape}}) {
      NpyWriter w(folder + name, "<f4", *shape);  // straight from the library's buffer, no copy
      w.append(buffer->data(), buffer->size());
      w.finish();
    }
    result.write_seconds += seconds_since(written);
  }
  return result;
}

}  // namespace kvfuzz::worker
