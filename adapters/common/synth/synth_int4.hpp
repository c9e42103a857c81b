// Synthetic compressed-tensors pack-quantized INT4 weights (Kimi-K2-Thinking's routed experts,
// model-families-2026.md §2.2): symmetric groups along K with BF16 scales, codes + 8 packed
// eight to an int32 word, LSB first.
#pragma once

#include <moequant/tensor.hpp>

#include <cstdint>
#include <vector>

namespace moequant::adapters {

struct PackedInt4 {
    std::vector<std::uint8_t> words;   // I32 [N, K/8]
    std::vector<std::uint8_t> scales;  // BF16 [N, K/group]
};

// Per group: s = bf16(max(amax, 1e-4) / 7), code = clamp(round(w / s), -8, 7). K must be a
// multiple of `group` and of 8.
PackedInt4 pack_int4_groups(const std::vector<float>& w, const Shape& shape, std::int64_t group);

}  // namespace moequant::adapters
