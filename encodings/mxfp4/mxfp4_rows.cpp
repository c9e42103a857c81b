#include "mxfp4_rows.hpp"

#include <moequant/dtype_convert.hpp>

#include <algorithm>
#include <array>

namespace moequant::encodings {
namespace {

// E2M1, sign bit first: the table every MXFP4 implementation shares (§2.1).
constexpr std::array<float, 16> e2m1_values = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                               -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

struct ElementPair {
    float even, odd;  // the low nibble is the even column
};

// One lookup per packed byte instead of two shifts and two lookups.
constexpr std::array<ElementPair, 256> byte_values = [] {
    std::array<ElementPair, 256> t{};
    for (unsigned b = 0; b < 256; ++b) t[b] = {e2m1_values[b & 0x0F], e2m1_values[b >> 4]};
    return t;
}();

// 2^(e-127) through the SDK's one E8M0 definition (e = 0 is the subnormal 2^-127, not zero).
const std::array<float, 256>& scale_values() {
    static const std::array<float, 256> t = [] {
        std::array<float, 256> v{};
        for (unsigned e = 0; e < 256; ++e) v[e] = f8_e8m0_to_f32(static_cast<std::uint8_t>(e));
        return v;
    }();
    return t;
}

}  // namespace

std::optional<std::int64_t> first_refused_block(const std::uint8_t* scales, std::int64_t first_block,
                                                std::int64_t last_block) noexcept {
    for (std::int64_t b = first_block; b <= last_block; ++b)
        if (scales[b] > mxfp4_largest_scale) return b;
    return std::nullopt;
}

void decode_mxfp4_row(const std::uint8_t* packed, const std::uint8_t* scales, std::int64_t col_begin,
                      std::int64_t col_end, float* out) noexcept {
    const auto& scale = scale_values();
    std::int64_t c = col_begin;
    while (c < col_end) {
        const std::int64_t block = c / mxfp4_block;
        const std::int64_t block_end = std::min(col_end, (block + 1) * mxfp4_block);
        const float s = scale[scales[block]];
        float* __restrict o = out + (c - col_begin);
        if (c & 1) {  // a window may start on a high nibble (blocks never do)
            *o++ = e2m1_values[packed[c / 2] >> 4] * s;
            ++c;
        }
        // Whole bytes: restrict and unsigned counts let the compiler keep `s` and the pointers in registers.
        const std::uint8_t* __restrict bytes = packed + c / 2;
        const auto pairs = static_cast<std::size_t>((block_end - c) / 2);
        for (std::size_t j = 0; j < pairs; ++j) {
            const ElementPair p = byte_values[bytes[j]];
            o[2 * j] = p.even * s;
            o[2 * j + 1] = p.odd * s;
        }
        c += static_cast<std::int64_t>(2 * pairs);
        if (c < block_end) {  // ... and end on a low one
            o[2 * pairs] = e2m1_values[packed[c / 2] & 0x0F] * s;
            ++c;
        }
    }
}

}  // namespace moequant::encodings
