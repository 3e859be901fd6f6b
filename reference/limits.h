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
inline constexpr int64_t kMaxPoolSlots = int64_t{1} << 22;        // per pool, page 0 included
inline constexpr int32_t kMaxRequests = 1024;
inline constexpr int32_t kMaxContextLen = 1 << 17;
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
inline constexpr int32_t kMaxRequestId = 1 << 20;
// K and V floats over all layers' pools: 2^28 floats is 1 GiB.
inline constexpr int64_t kMaxPoolFloats = int64_t{1} << 28;
// Oracle multiply-adds: (visible query-key pairs) x q_heads x (head_dim + v_head_dim), summed over
// layers. 2^36 is about a minute of the oracle on two cores.
inline constexpr int64_t kMaxOracleWork = int64_t{1} << 36;

}  // namespace kvfuzz::limits
