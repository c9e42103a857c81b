// Synthetic MXFP4 weights in DeepSeek-V4-Flash's per-expert layout (model-families-2026.md
// §2.1, §3.8): E2M1 codes two per byte (even column in the low nibble) and one E8M0 scale byte
// per 32 columns.
#pragma once

#include <moequant/tensor.hpp>

#include <cstdint>
#include <vector>

namespace moequant::adapters {

struct PackedMxfp4 {
    std::vector<std::uint8_t> codes;   // I8 [N, K/2]
    std::vector<std::uint8_t> scales;  // F8_E8M0 [N, K/32]
};

// Per block of 32: the smallest power-of-two scale 2^(e-127) with amax / scale <= 6, codes the
// nearest E2M1 value of w / scale. K must be a multiple of 32.
PackedMxfp4 pack_mxfp4(const std::vector<float>& w, const Shape& shape);

}  // namespace moequant::adapters
