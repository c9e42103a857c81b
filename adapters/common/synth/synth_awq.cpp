#include "synth_awq.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace moequant::adapters {
namespace {

// AutoAWQ's pack order: the output column nibble p of a word holds.
constexpr int awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// Rows of `values` [rows, N] (4-bit each) packed eight columns a word in AWQ's order.
std::vector<std::uint8_t> pack_rows(const std::vector<std::uint8_t>& values, std::int64_t rows, std::int64_t n) {
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows * n / 8) * 4);
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t j = 0; j < n / 8; ++j) {
            std::uint32_t word = 0;
            for (int p = 0; p < 8; ++p) word |= std::uint32_t{values[static_cast<std::size_t>(r * n + 8 * j + awq_order[p])]} << (4 * p);
            std::memcpy(bytes.data() + static_cast<std::size_t>(r * (n / 8) + j) * 4, &word, 4);
        }
    return bytes;
}

}  // namespace

PackedAwq pack_awq(const std::vector<float>& w, const Shape& shape, std::int64_t group) {
    const std::int64_t n = shape[0], k = shape[1];
    if (k % group != 0 || n % 8 != 0) throw Error(ErrorKind::internal, "synthetic AWQ weights need K divisible by the group, N by 8");
    const std::int64_t groups = k / group;
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(k * n)), zeros(static_cast<std::size_t>(groups * n));
    PackedAwq out;
    out.scales.resize(static_cast<std::size_t>(groups * n) * 2);
    for (std::int64_t g = 0; g < groups; ++g)
        for (std::int64_t col = 0; col < n; ++col) {
            float lo = 0, hi = 0;
            for (std::int64_t r = g * group; r < (g + 1) * group; ++r) {
                lo = std::min(lo, w[static_cast<std::size_t>(col * k + r)]);
                hi = std::max(hi, w[static_cast<std::size_t>(col * k + r)]);
            }
            const std::uint16_t bits = f32_to_f16(std::max(hi - lo, 1e-5f) / 15.0f);
            std::memcpy(out.scales.data() + static_cast<std::size_t>(g * n + col) * 2, &bits, 2);
            const float s = f16_to_f32(bits);
            const float z = std::clamp(std::nearbyint(-lo / s), 0.0f, 15.0f);
            zeros[static_cast<std::size_t>(g * n + col)] = static_cast<std::uint8_t>(z);
            for (std::int64_t r = g * group; r < (g + 1) * group; ++r)
                codes[static_cast<std::size_t>(r * n + col)] =
                    static_cast<std::uint8_t>(std::clamp(std::nearbyint(w[static_cast<std::size_t>(col * k + r)] / s) + z, 0.0f, 15.0f));
        }
    out.qweight = pack_rows(codes, k, n);
    out.qzeros = pack_rows(zeros, groups, n);
    return out;
}

}  // namespace moequant::adapters
