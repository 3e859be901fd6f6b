// A page_table executor on the GPU, written against kvfuzz's C ABI: the example CUDA users copy
// (the CPU counterpart, with the same semantics, is adapters/examples/cpp/page_table_executor.cc).
//
// Where it sits: built as build/adapters/libcuda_page_table.so when CMake finds nvcc, and run
// under kvfuzz-worker, which hands it guarded host arrays and checks what it wrote:
//
//   kvfuzz run --backend cuda_page_table
//              --adapter "build/backends/kvfuzz-worker build/adapters/libcuda_page_table.so"
//
// Each call copies the layer's pools, its Q slice and the metadata of every part into device
// buffers with sentinel guard zones (device_buffer.h; their memory, allocated by the first requests
// and reused by the next: device_pool.h), runs one kernel per part (one block per
// (batch token, q head), fp32 online softmax over tiles of keys, merged by LSE into the layer's
// result on the device), every layer queued before any waits, then reads back every guard, the
// kernels' key errors, out and lse of every layer after a single synchronization a request (readback.h: with several worker processes on one GPU each blocking call
// waits for the others' work too), and checks them. A guard that
// changed, a key outside its row's pages or the pool, and every CUDA API error are a failed run
// naming the array or the call. KVFUZZ_EXAMPLE_BREAK (adapters/examples/cpp/example_break.h)
// breaks it like the C++ examples.
//
// Semantics (flash_attn_with_kvcache, FAMILIES.md page_table): layer l reads the group named by
// plan["layer_group"][l]; part p of the group has "<group>.parts.<p>.{cu_seqlens_q,cache_seqlens,
// page_table}"; row b's queries are tokens cu_seqlens_q[b] .. cu_seqlens_q[b+1], its keys
// k < cache_seqlens[b] live at slot page_table[b * width + k / ps] * ps + k % ps; causal or a
// window: bottom-right diagonal last = k_len - q_len + i, a window also drops k < last - window_left.
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "adapters/examples/cpp/example_arrays.h"
#include "adapters/examples/cpp/example_attention.h"
#include "adapters/examples/cpp/example_executor.h"
#include "adapters/examples/cuda/device_buffer.h"

namespace {

using namespace kvfuzz_example;
using kvfuzz_cuda::DeviceBuffer;
using kvfuzz_cuda::Failure;
using nlohmann::json;

constexpr int kThreads = 128;  // keys per tile, and the threads that share a query's output dims
constexpr int kMaxDimsPerThread = 8;  // v_head_dim <= kThreads * kMaxDimsPerThread
constexpr int kMaxHeadDim = 2048;

// What the kernel reports through its error buffer: the first key that left its row or the pool.
enum KeyError : int { kKeyOk = 0, kKeyPastPages = 1, kKeyOutsidePool = 2 };

struct PartArgs {
  const int32_t* cu_q;     // [rows + 1]
  const int32_t* seqlens;  // [rows]
  const int32_t* table;    // [rows, width]
  int64_t rows, width, ps, slots;
  int64_t tokens, q_heads, kv_heads, head_dim, v_head_dim;
  bool right_edge, mla;
  int64_t window_left;
  float sm_scale, softcap;
  int brk;  // kvfuzz_example::Break, for the key-choosing variants
  const float* q;  // the layer's [tokens, q_heads, head_dim]
  const float* k;  // [slots, kv_heads, head_dim]
  const float* v;  // [slots, kv_heads, v_head_dim]; MLA: k, with K's row strides
  float* out;      // the layer's merged [tokens, q_heads, v_head_dim]
  float* lse;      // the layer's merged [tokens, q_heads]
  int64_t* error;  // [4]: KeyError, row, key, slot or page
};

// The floats of Q's shared copy: head_dim rounded up to 4, the tail zero. The dot product's
// remainder (head_dim % 4 floats) compiles to one 12-byte shared load, which read past an exactly
// sized dynamic allocation: no wrong result on the hardware, but an "Invalid __shared__ read of
// size 12 bytes" (line of the dot product) under compute-sanitizer memcheck, found by the memcheck
// campaign over generated cases.
__host__ __device__ constexpr int64_t padded_head_dim(int64_t head_dim) { return (head_dim + 3) / 4 * 4; }

__device__ float block_reduce(float x, bool is_max, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int o = 16; o > 0; o /= 2) {
    const float y = __shfl_xor_sync(0xffffffffu, x, o);
    x = is_max ? fmaxf(x, y) : x + y;
  }
  __syncthreads();  // scratch may still be read by the previous reduction
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  x = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) x = is_max ? fmaxf(x, scratch[w]) : x + scratch[w];
  return x;
}

// Block (token t, q head h): finds t's row of this part, attends over the row's visible keys and
// merges the result into out/lse of (t, h). Tokens in no row of the part leave out/lse alone.
__global__ void __launch_bounds__(kThreads) page_table_kernel(PartArgs a) {
  const int64_t t = blockIdx.x, h = blockIdx.y;
  int64_t b = -1;
  for (int64_t r = 0; r < a.rows; ++r)
    if (a.cu_q[r] <= t && t < a.cu_q[r + 1]) {
      b = r;
      break;
    }
  if (b < 0) return;
  const int64_t q_len = a.cu_q[b + 1] - a.cu_q[b], i = t - a.cu_q[b];
  int64_t k_len = a.seqlens[b];
  if (a.brk == static_cast<int>(Break::drop_last_key) && k_len > 1) --k_len;
  const int64_t last = k_len - q_len + i;
  int64_t k_end = k_len;  // keys [k_begin, k_end) are visible
  int64_t k_begin = 0;
  if (a.right_edge) k_end = max(int64_t{0}, min(k_len, last + 1));
  if (a.window_left >= 0) k_begin = max(int64_t{0}, last - a.window_left);
  const int64_t kvh = h / (a.q_heads / a.kv_heads);

  extern __shared__ float q_sh[];  // padded_head_dim(head_dim) floats, zero past head_dim
  __shared__ float p_sh[kThreads];
  __shared__ int64_t slot_sh[kThreads];
  __shared__ float scratch[kThreads / 32];
  const float* qv = a.q + (t * a.q_heads + h) * a.head_dim;
  for (int64_t d = threadIdx.x; d < padded_head_dim(a.head_dim); d += kThreads) q_sh[d] = d < a.head_dim ? qv[d] : 0.0f;
  __syncthreads();

  const int64_t k_row = a.kv_heads * a.head_dim;
  const int64_t v_row = a.mla ? k_row : a.kv_heads * a.v_head_dim, v_head = a.mla ? a.head_dim : a.v_head_dim;
  float m = -INFINITY, l = 0.0f, acc[kMaxDimsPerThread];
  for (int j = 0; j < kMaxDimsPerThread; ++j) acc[j] = 0.0f;
  for (int64_t k0 = k_begin; k0 < k_end; k0 += kThreads) {
    const int64_t k = k0 + threadIdx.x;
    float s = -INFINITY;
    int64_t slot = -1;
    if (k < k_end) {
      if (k / a.ps >= a.width) {
        if (atomicCAS(reinterpret_cast<unsigned long long*>(a.error), 0ull, kKeyPastPages) == 0ull) {
          a.error[1] = b, a.error[2] = k, a.error[3] = k / a.ps;
        }
      } else {
        int64_t page = a.table[b * a.width + k / a.ps];
        if (a.brk == static_cast<int>(Break::next_page) && k / a.ps == (k_len - 1) / a.ps) ++page;
        slot = page * a.ps + k % a.ps;
        if (a.brk == static_cast<int>(Break::freed_slot) && k == 0) slot = a.slots - 1;
        if (slot < 0 || slot >= a.slots) {
          if (atomicCAS(reinterpret_cast<unsigned long long*>(a.error), 0ull, kKeyOutsidePool) == 0ull) {
            a.error[1] = b, a.error[2] = k, a.error[3] = slot;
          }
          slot = -1;
        } else {
          const float* kv = a.k + slot * k_row + kvh * a.head_dim;
          float dot = 0.0f;
          for (int64_t d = 0; d < a.head_dim; ++d) dot = fmaf(q_sh[d], kv[d], dot);
          s = dot * a.sm_scale;
          if (a.softcap > 0.0f) s = a.softcap * tanhf(s / a.softcap);
        }
      }
    }
    const float tile_max = block_reduce(s, true, scratch);
    if (tile_max == -INFINITY) continue;  // uniform across the block
    const float m_new = fmaxf(m, tile_max);
    const float scale = m == -INFINITY ? 0.0f : expf(m - m_new);
    const float p = s == -INFINITY ? 0.0f : expf(s - m_new);
    p_sh[threadIdx.x] = p;
    slot_sh[threadIdx.x] = slot;
    const float tile_sum = block_reduce(p, false, scratch);  // its __syncthreads publishes p_sh, slot_sh
    l = l * scale + tile_sum;
    for (int j = 0; j < kMaxDimsPerThread; ++j) {
      const int64_t d = threadIdx.x + static_cast<int64_t>(j) * kThreads;
      if (d >= a.v_head_dim) break;
      float o = acc[j] * scale;
      for (int x = 0; x < kThreads && k0 + x < k_end; ++x)
        if (p_sh[x] != 0.0f) o = fmaf(p_sh[x], a.v[slot_sh[x] * v_row + kvh * v_head + d], o);
      acc[j] = o;
    }
    m = m_new;
    __syncthreads();  // p_sh and slot_sh are rewritten by the next tile
  }
  if (m == -INFINITY || l == 0.0f) return;  // no visible key: this part adds nothing
  // merge_state with what earlier parts left in (t, h): weights exp(lse_x - lse).
  const int64_t r = t * a.q_heads + h;
  const float l_a = a.lse[r], l_b = m + logf(l);
  const float l_m = l_a == -INFINITY ? l_b : fmaxf(l_a, l_b) + log1pf(expf(-fabsf(l_a - l_b)));
  const float w_a = l_a == -INFINITY ? 0.0f : expf(l_a - l_m), w_b = expf(l_b - l_m);
  for (int j = 0; j < kMaxDimsPerThread; ++j) {
    const int64_t d = threadIdx.x + static_cast<int64_t>(j) * kThreads;
    if (d >= a.v_head_dim) break;
    float* o = a.out + r * a.v_head_dim + d;
    *o = w_a * *o + w_b * (acc[j] / l);
  }
  __syncthreads();  // every thread has read lse[r]
  if (threadIdx.x == 0) a.lse[r] = l_m;
}

__global__ void fill_kernel(float* x, int64_t n, float value) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] = value;
}

__global__ void scale_kernel(float* x, int64_t n, float factor) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] *= factor;
}

unsigned grid_for(int64_t n) { return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>((n + 255) / 256, 1), 4096)); }

// One part of `layer` into the layer's out/lse on the device, queued: its key error (base.error)
// is read back with the layer's results.
void run_part(const kvfuzz_call* call, const Model& m, const json& desc, const std::string& prefix, int64_t window_left,
              PartArgs base, std::deque<DeviceBuffer>& keep) {
  const auto cu_q = array<int32_t>(call, prefix + "cu_seqlens_q"), seqlens = array<int32_t>(call, prefix + "cache_seqlens");
  const auto table = array<int32_t>(call, prefix + "page_table");
  const auto rows = desc.at("rows").get<int64_t>(), width = desc.at("width").get<int64_t>();
  const auto ps = desc.at("view_page_size").get<int64_t>();
  if (ps < 1 || rows < 0 || width < 0 || rows * width > table.size || rows + 1 > cu_q.size || rows > seqlens.size)
    throw Failure(prefix + ": " + std::to_string(rows) + " rows of width " + std::to_string(width) + " do not fit its arrays");
  for (int64_t r = 0; r < rows; ++r) {  // the host checks the row bounds the kernel trusts
    const int64_t q0 = cu_q[r], q_len = cu_q[r + 1] - q0;
    if (q_len > 0 && (q0 < 0 || q0 + q_len > m.tokens))
      throw Failure(prefix + " row " + std::to_string(r) + ": queries outside the batch");
  }
  if (rows == 0 || m.tokens == 0 || m.q_heads == 0) return;
  PartArgs a = base;
  keep.emplace_back(prefix + "cu_seqlens_q", cu_q.data, static_cast<size_t>(rows + 1) * sizeof(int32_t));
  a.cu_q = keep.back().as<int32_t>();
  keep.emplace_back(prefix + "cache_seqlens", seqlens.data, static_cast<size_t>(rows) * sizeof(int32_t));
  a.seqlens = keep.back().as<int32_t>();
  keep.emplace_back(prefix + "page_table", table.data, static_cast<size_t>(rows * width) * sizeof(int32_t));
  a.table = keep.back().as<int32_t>();
  a.rows = rows, a.width = width, a.ps = ps;
  a.right_edge = desc.at("causal").get<bool>() || window_left >= 0;
  a.window_left = window_left;
  const dim3 grid(static_cast<unsigned>(m.tokens), static_cast<unsigned>(m.q_heads));
  page_table_kernel<<<grid, kThreads, static_cast<size_t>(padded_head_dim(m.head_dim)) * sizeof(float)>>>(a);
  kvfuzz_cuda::check(cudaGetLastError(), "page_table_kernel launch (" + prefix + ")");
}

// Throws the Failure of a part's key error (the kernel's four int64: kind, row, key, page or
// slot), read back after its layer.
void throw_key_error(const int64_t* error, const std::string& prefix, int64_t width, int64_t slots) {
  if (error[0] == kKeyPastPages)
    throw Failure(prefix + " row " + std::to_string(error[1]) + ": key " + std::to_string(error[2]) + " is on page " +
                  std::to_string(error[3]) + " of a row with " + std::to_string(width) + " pages");
  if (error[0] == kKeyOutsidePool)
    throw Failure(prefix + " row " + std::to_string(error[1]) + ": key " + std::to_string(error[2]) + " at slot " +
                  std::to_string(error[3]) + ", outside the pool of " + std::to_string(slots) + " slots");
}

// What a queued layer left to read back and check: its buffers are keep[first_buffer, end_buffer).
struct QueuedLayer {
  std::string group;
  const json* parts;
  int64_t slots, o_layer, lse_layer;
  float* out;
  float* lse;
  int64_t* error;
  size_t first_buffer, end_buffer;
};

// Queues layer `layer`'s copies and kernels on the device; nothing waits.
QueuedLayer queue_layer(const kvfuzz_call* call, const Model& m, const json& plan, int layer, std::deque<DeviceBuffer>& keep) {
  const auto name = plan.at("layer_group").at(static_cast<size_t>(layer)).get<std::string>();
  const json& group = name.rfind("local.", 0) == 0 ? plan.at("local").at(std::stoul(name.substr(6))) : plan.at(name);
  const auto window_left = plan.at("window_left").at(static_cast<size_t>(layer)).get<int64_t>();
  if (m.kv_heads < 1 || m.q_heads % m.kv_heads != 0) throw Failure("q_heads is not a multiple of kv_heads");
  if (m.head_dim > kMaxHeadDim || m.v_head_dim > kThreads * kMaxDimsPerThread || (m.mla && m.v_head_dim > m.head_dim))
    throw Failure("head_dim " + std::to_string(m.head_dim) + " / v_head_dim " + std::to_string(m.v_head_dim) + " beyond this kernel");
  const std::string l = std::to_string(layer);
  const kvfuzz_array& k_cache = call->k_cache[layer];
  const int64_t q_layer = m.tokens * m.q_heads * m.head_dim, o_layer = m.tokens * m.q_heads * m.v_head_dim;
  const int64_t slots = k_cache.ndim > 0 ? k_cache.shape[0] : 0;
  if (static_cast<int64_t>(k_cache.bytes) < slots * m.kv_heads * m.head_dim * 4 ||
      static_cast<int64_t>(call->q.bytes) < (layer + 1) * q_layer * 4)
    throw Failure("layer " + l + ": the pool or q is smaller than the model says");

  // The buffers of this layer: every one guarded, every guard checked before the result is read.
  QueuedLayer queued{name, &group.at("parts"), slots, o_layer, m.tokens * m.q_heads, nullptr, nullptr, nullptr, keep.size(), 0};
  PartArgs a{};
  keep.emplace_back("q", static_cast<const float*>(call->q.data) + layer * q_layer, static_cast<size_t>(q_layer) * 4);
  a.q = keep.back().as<float>();
  keep.emplace_back("k_cache." + l, k_cache.data, static_cast<size_t>(slots * m.kv_heads * m.head_dim) * 4);
  a.k = keep.back().as<float>();
  if (m.mla) {
    a.v = a.k;
  } else {
    const kvfuzz_array& v_cache = call->v_cache[layer];
    if (static_cast<int64_t>(v_cache.bytes) < slots * m.kv_heads * m.v_head_dim * 4) throw Failure("v_cache." + l + " is smaller than k_cache." + l);
    keep.emplace_back("v_cache." + l, v_cache.data, static_cast<size_t>(slots * m.kv_heads * m.v_head_dim) * 4);
    a.v = keep.back().as<float>();
  }
  keep.emplace_back("out", nullptr, static_cast<size_t>(o_layer) * 4);
  a.out = queued.out = keep.back().as<float>();
  keep.emplace_back("lse", nullptr, static_cast<size_t>(queued.lse_layer) * 4);
  a.lse = queued.lse = keep.back().as<float>();
  const json& parts = *queued.parts;
  const size_t error_bytes = parts.size() * 4 * sizeof(int64_t);  // a key error per part
  keep.emplace_back("key error", nullptr, error_bytes);
  a.error = queued.error = keep.back().as<int64_t>();
  kvfuzz_cuda::check(cudaMemsetAsync(a.error, 0, error_bytes), "cudaMemsetAsync of the key errors");
  kvfuzz_cuda::check(cudaMemsetAsync(a.out, 0, static_cast<size_t>(o_layer) * 4), "cudaMemsetAsync of out");
  fill_kernel<<<grid_for(queued.lse_layer), 256>>>(a.lse, queued.lse_layer, -std::numeric_limits<float>::infinity());
  kvfuzz_cuda::check(cudaGetLastError(), "fill_kernel launch (lse)");
  a.slots = slots, a.tokens = m.tokens, a.q_heads = m.q_heads, a.kv_heads = m.kv_heads;
  a.head_dim = m.head_dim, a.v_head_dim = m.v_head_dim, a.mla = m.mla;
  a.sm_scale = static_cast<float>(m.sm_scale), a.softcap = static_cast<float>(m.softcap);
  a.brk = static_cast<int>(broken());

  for (size_t p = 0; p < parts.size(); ++p) {
    PartArgs part = a;
    part.error = a.error + 4 * p;
    run_part(call, m, parts[p], name + ".parts." + std::to_string(p) + ".", window_left, part, keep);
  }
  if (broken() == Break::lse_base2) {
    scale_kernel<<<grid_for(queued.lse_layer), 256>>>(a.lse, queued.lse_layer, static_cast<float>(1.0 / std::log(2.0)));
    kvfuzz_cuda::check(cudaGetLastError(), "scale_kernel launch (lse_base2)");
  }
  queued.end_buffer = keep.size();
  return queued;
}

// Every layer queued, then everything read back after one synchronization and checked layer by
// layer, as the layers ran: a layer's key errors (its first part's first), its buffers' guards,
// then its out and lse. A layer the host refused (its arrays do not fit) fails after the layers
// queued before it are checked, as when each layer waited for its own results.
int run_page_table(const kvfuzz_call* call, const json& manifest) {
  const Model m = Model::of(manifest, call);
  const json& plan = manifest.at("plan");
  try {
    // The buffers of the request: blocks of the last request's, which its synchronization freed.
    kvfuzz_cuda::DevicePool::of_thread().restart();
    std::deque<DeviceBuffer> keep;  // a deque: references to its buffers stay valid as layers add theirs
    std::vector<QueuedLayer> layers;
    std::optional<Failure> refused;
    for (int layer = 0; layer < call->num_layers && !refused; ++layer) {
      try {
        layers.push_back(queue_layer(call, m, plan, layer, keep));
      } catch (const Failure& f) {
        refused = f;
      }
    }
    kvfuzz_cuda::Readback& r = kvfuzz_cuda::Readback::of_thread();
    size_t room = keep.size() * DeviceBuffer::kGuardRoom;
    for (const QueuedLayer& q : layers)
      room += kvfuzz_cuda::Readback::room(q.parts->size() * 4 * sizeof(int64_t)) +
              kvfuzz_cuda::Readback::room(static_cast<size_t>(q.o_layer) * 4) +
              kvfuzz_cuda::Readback::room(static_cast<size_t>(q.lse_layer) * 4);
    kvfuzz_cuda::check(r.begin(room), "cudaMallocHost of the read-back buffer");
    std::vector<size_t> guards;
    for (const DeviceBuffer& buffer : keep) guards.push_back(buffer.queue_guards(r));
    struct At {
      size_t errors, out, lse;
    };
    std::vector<At> at;
    for (const QueuedLayer& q : layers)
      at.push_back({r.queue(q.error, q.parts->size() * 4 * sizeof(int64_t)), r.queue(q.out, static_cast<size_t>(q.o_layer) * 4),
                    r.queue(q.lse, static_cast<size_t>(q.lse_layer) * 4)});
    // An API error of a refused layer (a launch that failed) is sticky: the refusal names it.
    if (const cudaError_t e = r.wait(); e != cudaSuccess && refused) throw *refused;
    else kvfuzz_cuda::check(e, "cudaStreamSynchronize after " + std::to_string(layers.size()) + " layers");
    for (size_t layer = 0; layer < layers.size(); ++layer) {
      const QueuedLayer& q = layers[layer];
      const json& parts = *q.parts;
      for (size_t p = 0; p < parts.size(); ++p)  // the first part's error first, as the parts ran
        throw_key_error(reinterpret_cast<const int64_t*>(r.at(at[layer].errors)) + 4 * p,
                        q.group + ".parts." + std::to_string(p) + ".", parts[p].at("width").get<int64_t>(), q.slots);
      for (size_t b = q.first_buffer; b < q.end_buffer; ++b) keep[b].check_guards(r.at(guards[b]));
      std::memcpy(call->out + layer * q.o_layer, r.at(at[layer].out), static_cast<size_t>(q.o_layer) * 4);
      std::memcpy(call->lse + layer * q.lse_layer, r.at(at[layer].lse), static_cast<size_t>(q.lse_layer) * 4);
    }
    if (refused) throw *refused;
  } catch (const Failure& f) {
    return kvfuzz_fail(call, "%s", f.what());
  }
  return 0;
}

}  // namespace

KVFUZZ_EXPORT int kvfuzz_executor_declare(char* json, size_t capacity) {
  return declare(json, capacity, "cuda_page_table", "page_table",
                 "CUDA page_table executor through the C ABI (flash_attn_with_kvcache semantics, fp32 on the GPU)",
                 /*batch=*/true);
}

KVFUZZ_EXPORT int kvfuzz_executor_run(const kvfuzz_call* call) { return run(call, run_page_table); }
