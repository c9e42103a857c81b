#include "row_kernels.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace moequant::amx {
namespace {

float load_bf16(const std::byte* row, std::size_t c) noexcept {
    std::uint16_t bits;
    std::memcpy(&bits, row + 2 * c, 2);
    return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

// cvtps2dq (round to nearest even; out of range or NaN -> INT32_MIN), then signed saturation
// to int8, as the reference's vector code does.
std::int8_t saturate_int8(float v) noexcept {
    if (!(std::fabs(v) < 2147483648.0f)) return -128;
    const float r = std::nearbyint(v);
    return static_cast<std::int8_t>(r > 127.0f ? 127 : r < -128.0f ? -128 : static_cast<int>(r));
}

// t rounded to a multiple of 16, ties away from zero, divided by 16.
std::uint8_t int4_nibble(std::int8_t t) noexcept {
    const int a = t < 0 ? -static_cast<int>(t) : t;
    const int m = ((a + 8) & 0xF0) >> 4;
    return static_cast<std::uint8_t>((t < 0 ? -m : m) & 0xF);
}

float amax(const std::byte* row, std::size_t k) noexcept {
    std::uint16_t m = 0;
    for (std::size_t c = 0; c < k; ++c) {
        std::uint16_t bits;
        std::memcpy(&bits, row + 2 * c, 2);
        m = std::max<std::uint16_t>(m, bits & 0x7FFF);
    }
    return std::bit_cast<float>(static_cast<std::uint32_t>(m) << 16);
}

void quantize_int8(const std::byte* row, std::size_t k, float inv, std::int8_t* codes) noexcept {
    for (std::size_t c = 0; c < k; ++c) codes[c] = saturate_int8(load_bf16(row, c) * inv);
}

void quantize_int4(const std::byte* row, std::size_t k, float inv, std::uint8_t* bytes) noexcept {
    for (std::size_t tile = 0; tile < k / 128; ++tile)
        for (std::size_t j = 0; j < 64; ++j) {
            const std::size_t c = tile * 128 + j;
            const std::uint8_t lo = int4_nibble(saturate_int8(load_bf16(row, c) * inv));
            const std::uint8_t hi = int4_nibble(saturate_int8(load_bf16(row, c + 64) * inv));
            bytes[tile * 64 + j] = static_cast<std::uint8_t>(lo | hi << 4);
        }
}

void transpose_panel(const std::uint8_t* rows, std::size_t row_stride, std::uint8_t* panel) noexcept {
    for (std::size_t g = 0; g < 16; ++g)
        for (std::size_t i = 0; i < 16; ++i) std::memcpy(panel + (g * 16 + i) * 4, rows + i * row_stride + g * 4, 4);
}

void finish_panels() noexcept {}

}  // namespace

const RowKernels scalar_row_kernels{&amax, &quantize_int8, &quantize_int4, &transpose_panel, &finish_panels};

}  // namespace moequant::amx
