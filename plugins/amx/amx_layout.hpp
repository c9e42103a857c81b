// kt-kernel's AMX BufferB layout for INT8 and INT4 expert weights (kt-cpu-format.md §4).
//
// A matrix [n, k] (n output rows, each with one float32 scale) is stored as code bytes in
// N-blocks of rows, K-blocks of columns, row groups of 32, and 2048-byte tiles of 32 rows x W
// columns in the AMX "VNNI" B-tile order; the n scales follow in natural row order (here they
// are a separate tensor, as in the `.kt` files and the merged safetensors).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace moequant::amx {

enum class Method { int8, int4 };

struct LayoutConstants {
    std::int64_t n_block;   // rows per N-block
    std::int64_t k_block;   // columns per K-block
    std::int64_t tile_k;    // columns per tile (INT8 64, INT4 128)
    std::int64_t n_step;    // rows per row group
};

constexpr LayoutConstants constants(Method m) noexcept {
    return m == Method::int8 ? LayoutConstants{64, 3584, 64, 32} : LayoutConstants{128, 3584, 128, 32};
}

// Code bytes of an [n, k] matrix: n*k (INT8) or n*k/2 (INT4).
constexpr std::int64_t code_bytes(Method m, std::int64_t n, std::int64_t k) noexcept {
    return m == Method::int8 ? n * k : n * k / 2;
}

// Empty when the shape can be packed; otherwise the rule it breaks, for an error message:
// n % 32 == 0 and k % 64 (INT8) or k % 128 (INT4) == 0.
std::string shape_problem(Method m, std::int64_t n, std::int64_t k);

// Byte offset of the 4-byte word holding columns [4g, 4g+4) of tile `tile` (W-wide, counted
// along k) of row `r`, within the code bytes; INT4 tiles hold columns j and j+64 of the tile
// in the low and high nibble of byte j.
std::int64_t tile_word_offset(Method m, std::int64_t n, std::int64_t k, std::int64_t r, std::int64_t tile,
                              std::int64_t g) noexcept;

// Packs integer codes, row-major [n, k] (INT8: -128..127; INT4: -8..7, stored as nibbles),
// into the code bytes of the layout (code_bytes(m, n, k) of them). For quantizers that choose
// the codes themselves (amx_calibrated_quantizer.hpp); the plain quantizer packs as it rounds.
void pack_codes(Method m, std::int64_t n, std::int64_t k, const std::int8_t* codes, std::uint8_t* out) noexcept;

}  // namespace moequant::amx
