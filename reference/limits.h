// The bounds every case must respect, so that no case can exhaust memory or run for hours.
//
// Where it sits: validate() enforces them, generators and decoders stay inside them, and error
// messages quote them. They are generous for real shapes (a DeepSeek MLA head of 576, contexts of
// 128K) and tight on the product of sizes, which is what costs memory and time.
#pragma once

#include <cstdint>

namespace kvfuzz::limits {

inline constexpr int32_t kMaxQHeads = 128;
inline constexpr int32_t kMaxHeadDim = 576;
inline constexpr int32_t kMaxLayers = 8;
inline constexpr int32_t kMaxPageSize = 256;
// Per pool, page 0 included. Pools materialize only written slots (backends/common/kv_pools.h), but
// the cache simulator keeps a few bytes per slot: 2^25 slots is about 1 GB of it.
inline constexpr int64_t kMaxPoolSlots = int64_t{1} << 25;
inline constexpr int32_t kMaxRequests = 1024;
inline constexpr int32_t kMaxContextLen = 1 << 18;  // the `long` profile's 131072 keys and more
inline constexpr int64_t kMaxReqToTokenEntries = int64_t{1} << 24;
inline constexpr int32_t kMaxHistoryOps = 1 << 16;
inline constexpr int32_t kMaxDraftTokens = 64;
inline constexpr int32_t kMaxTopk = 16;
inline constexpr int32_t kMaxDraftSteps = 16;
inline constexpr int32_t kMaxBatch = 512;  // entries and graph_bs
inline constexpr int32_t kMaxKvSplits = 64;
inline constexpr int32_t kMaxDeviceSms = 1024;
inline constexpr double kMaxSmScale = 16.0;
inline constexpr double kMaxSoftcap = 1e4;
inline constexpr double kMaxSink = 1e4;  // |model.sinks[h]|: a logit, like the capped ones
// model.layers[i].k_scale / v_scale (fp8 caches): 2^-8 (|x| < 2 saturates at 448) to 2^4, with at
// most 4 significand bits, so stored * scale (4 bits times 4) is exact in fp16, bf16 and fp32.
inline constexpr double kMinKvScale = 0x1p-8;
inline constexpr double kMaxKvScale = 0x1p4;
inline constexpr int32_t kKvScaleBits = 4;
inline constexpr int32_t kMaxRequestId = 1 << 20;
// K and V floats over all layers' pools, dense: 2^28 floats is 1 GiB, and slots per pool. The
// generator's CPU profiles (tiny..large) size their pools under both.
inline constexpr int64_t kMaxPoolFloats = int64_t{1} << 28;
inline constexpr int64_t kCpuProfilePoolSlots = int64_t{1} << 22;
// What validate() bounds: the K and V floats written into the pools (live tokens x layers), since
// pools store nothing else (kv_pools.h); 2^30 floats is 4 GiB. A `long` case writes about 2^29.
inline constexpr int64_t kMaxWrittenPoolFloats = int64_t{1} << 30;
// Oracle multiply-adds: (visible query-key pairs) x q_heads x (head_dim + v_head_dim), summed over
// layers. 2^36 is about a minute of the oracle on two cores.
inline constexpr int64_t kMaxOracleWork = int64_t{1} << 36;

}  // namespace kvfuzz::limits
