// Synthetic AutoAWQ INT4 weights in the GEMM packing (what AWQ releases of MoE models store):
// asymmetric groups along K with zero points, F16 scales, qweight [K, N/8] and qzeros [G, N/8]
// with eight output columns a word in AWQ's interleaved order [0,2,4,6,1,3,5,7].
#pragma once

#include <moequant/tensor.hpp>

#include <cstdint>
#include <vector>

namespace moequant::adapters {

struct PackedAwq {
    std::vector<std::uint8_t> qweight;  // I32 [K, N/8]
    std::vector<std::uint8_t> qzeros;   // I32 [K/group, N/8]
    std::vector<std::uint8_t> scales;   // F16 [K/group, N]
};

// `w` is the [N, K] weight. Per group and output column, AutoAWQ's min-max rule: s = f16((max −
// min) / 15), z = clamp(round(−min / s), 0, 15), q = clamp(round(w / s) + z, 0, 15). K must be a
// multiple of `group`, N of 8.
PackedAwq pack_awq(const std::vector<float>& w, const Shape& shape, std::int64_t group);

}  // namespace moequant::adapters
