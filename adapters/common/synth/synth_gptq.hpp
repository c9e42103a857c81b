// Synthetic AutoGPTQ "gptq" INT4 weights as Qwen's GPTQ-Int4 releases store them
// (model-families-2026.md §2.4): symmetric groups along K, v1 zeros (zero − 1 stored), F16
// scales, g_idx = k / group.
#pragma once

#include <moequant/tensor.hpp>

#include <cstdint>
#include <vector>

namespace moequant::adapters {

struct PackedGptq {
    std::vector<std::uint8_t> qweight;  // I32 [K/8, N], packed along K
    std::vector<std::uint8_t> qzeros;   // I32 [K/group, N/8], packed along N
    std::vector<std::uint8_t> scales;   // F16 [K/group, N]
    std::vector<std::uint8_t> g_idx;    // I32 [K]
};

// `w` is the [N, K] weight. Per group and output column: s = f16(2·amax / 15), zero 8,
// q = clamp(round(w / s) + 8, 0, 15). K must be a multiple of `group` and 8, N of 8.
PackedGptq pack_gptq(const std::vector<float>& w, const Shape& shape, std::int64_t group);

}  // namespace moequant::adapters
