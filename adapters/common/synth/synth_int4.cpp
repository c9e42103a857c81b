#include "synth_int4.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace moequant::adapters {

PackedInt4 pack_int4_groups(const std::vector<float>& w, const Shape& shape, std::int64_t group) {
    const std::int64_t n = shape[0], k = shape[1];
    if (k % group != 0 || k % 8 != 0) throw Error(ErrorKind::internal, "synthetic INT4 weights need K divisible by the group and 8");
    const std::int64_t groups = k / group;
    PackedInt4 out;
    out.words.assign(static_cast<std::size_t>(n * k / 2), 0);
    out.scales.resize(static_cast<std::size_t>(n * groups) * 2);
    for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t g = 0; g < groups; ++g) {
            float amax = 0;
            for (std::int64_t c = g * group; c < (g + 1) * group; ++c) amax = std::max(amax, std::fabs(w[static_cast<std::size_t>(r * k + c)]));
            const std::uint16_t bits = f32_to_bf16(std::max(amax, 1e-4f) / 7.0f);
            std::memcpy(out.scales.data() + static_cast<std::size_t>(r * groups + g) * 2, &bits, 2);
            const float s = bf16_to_f32(bits);
            for (std::int64_t c = g * group; c < (g + 1) * group; ++c) {
                const float q = std::nearbyint(w[static_cast<std::size_t>(r * k + c)] / s);
                const auto u = static_cast<std::uint8_t>(std::clamp(q, -8.0f, 7.0f) + 8.0f);
                // Little-endian int32 words, eight codes LSB first: code c is nibble c%2 of byte c/2.
                std::uint8_t& byte = out.words[static_cast<std::size_t>((r * k + c) / 2)];
                byte = static_cast<std::uint8_t>(c % 2 == 0 ? (byte & 0xF0) | u : (byte & 0x0F) | (u << 4));
            }
        }
    return out;
}

}  // namespace moequant::adapters
