#include "synth_gptq.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace moequant::adapters {
namespace {

void put_word(std::vector<std::uint8_t>& bytes, std::size_t word, std::uint32_t value) {
    std::memcpy(bytes.data() + word * 4, &value, 4);
}

}  // namespace

PackedGptq pack_gptq(const std::vector<float>& w, const Shape& shape, std::int64_t group) {
    const std::int64_t n = shape[0], k = shape[1];
    if (k % group != 0 || k % 8 != 0 || n % 8 != 0)
        throw Error(ErrorKind::internal, "synthetic GPTQ weights need K divisible by the group and 8, N by 8");
    const std::int64_t groups = k / group;
    PackedGptq out;
    out.qweight.assign(static_cast<std::size_t>(k / 8 * n) * 4, 0);
    out.qzeros.resize(static_cast<std::size_t>(groups * n / 8) * 4);
    out.scales.resize(static_cast<std::size_t>(groups * n) * 2);
    out.g_idx.resize(static_cast<std::size_t>(k) * 4);
    std::vector<std::uint32_t> qweight(static_cast<std::size_t>(k / 8 * n), 0);
    for (std::int64_t g = 0; g < groups; ++g)
        for (std::int64_t col = 0; col < n; ++col) {
            float amax = 0;
            for (std::int64_t r = g * group; r < (g + 1) * group; ++r) amax = std::max(amax, std::fabs(w[static_cast<std::size_t>(col * k + r)]));
            const std::uint16_t bits = f32_to_f16(std::max(amax, 1e-4f) * 2.0f / 15.0f);
            std::memcpy(out.scales.data() + static_cast<std::size_t>(g * n + col) * 2, &bits, 2);
            const float s = f16_to_f32(bits);
            for (std::int64_t r = g * group; r < (g + 1) * group; ++r) {
                const float q = std::clamp(std::nearbyint(w[static_cast<std::size_t>(col * k + r)] / s) + 8.0f, 0.0f, 15.0f);
                qweight[static_cast<std::size_t>((r / 8) * n + col)] |= static_cast<std::uint32_t>(q) << (4 * (r % 8));
            }
        }
    for (std::size_t i = 0; i < qweight.size(); ++i) put_word(out.qweight, i, qweight[i]);
    for (std::size_t i = 0; i < static_cast<std::size_t>(groups * n / 8); ++i) put_word(out.qzeros, i, 0x77777777u);  // v1: 8 - 1
    for (std::int64_t r = 0; r < k; ++r) {
        const auto g = static_cast<std::int32_t>(r / group);
        std::memcpy(out.g_idx.data() + static_cast<std::size_t>(r) * 4, &g, 4);
    }
    return out;
}

}  // namespace moequant::adapters
