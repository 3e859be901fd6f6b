// Element types of the KV cache and what each can represent exactly.
//
// Where it sits: the scenario names a dtype; the value source draws only numbers that the dtype
// represents exactly (so fp32 storage on the CPU holds them bit for bit), and backends round
// intermediate results (the softmax probabilities P) the way a kernel of that dtype does.
//
//   float p = round_to(DType::bf16, 0.1f);     // 0.10009765625f
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kvfuzz {

enum class DType : uint8_t { fp32, fp16, bf16, fp8_e4m3 };

std::string_view to_string(DType d);
std::optional<DType> parse_dtype(std::string_view s);

// Significand bits, the implicit leading bit included: 24, 11, 8, 4.
int significand_bits(DType d);

// Unit roundoff u = 2^-significand_bits: the relative error of one rounding.
double unit_roundoff(DType d);

// Rounds to the nearest value of `d` (ties to even), saturating to the largest finite value for
// fp8_e4m3 as its converters do; NaN stays NaN. Exact for every input in range.
float round_to(DType d, float x);

// An fp8 KV cache with a per-tensor scale, as vLLM's cache writers store one and its kernels read
// it: the cache holds e4m3(x / scale), the fp32 quotient rounded and saturated at +-448
// (vllm/v1/attention/ops/triton_reshape_and_cache_flash.py:126,140 in 0.33.0: `key_load /
// tl.load(k_scale)` stored to an fp8 cache), and a kernel reads stored * scale
// (triton_unified_attention.py:56, `_cast_kv_tile`). Returns what the kernel reads.
//   dequantize_fp8(1.875f, 0.375f) == 1.875f;  dequantize_fp8(1.75f, 0x1p-8f) == 1.75f  (448 * 2^-8)
float dequantize_fp8(float x, float scale);

}  // namespace kvfuzz
