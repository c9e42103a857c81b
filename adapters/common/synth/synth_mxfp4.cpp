#include "synth_mxfp4.hpp"

#include <moequant/error.hpp>

#include <algorithm>
#include <cmath>

namespace moequant::adapters {
namespace {

constexpr float e2m1_magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// The E2M1 code (sign bit 8) nearest to x, |x| <= 6.
std::uint8_t nearest_e2m1(float x) {
    const float a = std::fabs(x);
    int best = 0;
    for (int c = 1; c < 8; ++c)
        if (std::fabs(e2m1_magnitudes[c] - a) < std::fabs(e2m1_magnitudes[best] - a)) best = c;
    return static_cast<std::uint8_t>(best | (x < 0 && best != 0 ? 8 : 0));
}

}  // namespace

PackedMxfp4 pack_mxfp4(const std::vector<float>& w, const Shape& shape) {
    const std::int64_t n = shape[0], k = shape[1];
    if (k % 32 != 0) throw Error(ErrorKind::internal, "synthetic MXFP4 weights need K divisible by 32");
    PackedMxfp4 out;
    out.codes.assign(static_cast<std::size_t>(n * k / 2), 0);
    out.scales.resize(static_cast<std::size_t>(n * k / 32));
    for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t b = 0; b < k / 32; ++b) {
            float amax = 0;
            for (std::int64_t c = b * 32; c < (b + 1) * 32; ++c) amax = std::max(amax, std::fabs(w[static_cast<std::size_t>(r * k + c)]));
            const int exponent = amax > 0 ? static_cast<int>(std::ceil(std::log2(amax / 6.0f))) : -127;
            const int e = std::clamp(exponent + 127, 0, 252);
            out.scales[static_cast<std::size_t>(r * (k / 32) + b)] = static_cast<std::uint8_t>(e);
            const float scale = std::ldexp(1.0f, e - 127);
            for (std::int64_t c = b * 32; c < (b + 1) * 32; ++c) {
                const std::uint8_t code = nearest_e2m1(std::clamp(w[static_cast<std::size_t>(r * k + c)] / scale, -6.0f, 6.0f));
                std::uint8_t& byte = out.codes[static_cast<std::size_t>((r * k + c) / 2)];
                byte = static_cast<std::uint8_t>(c % 2 == 0 ? (byte & 0xF0) | code : (byte & 0x0F) | (code << 4));
            }
        }
    return out;
}

}  // namespace moequant::adapters
