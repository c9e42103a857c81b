#include "amx_layout.hpp"

#include <algorithm>

namespace moequant::amx {

std::string shape_problem(Method m, std::int64_t n, std::int64_t k) {
    const std::int64_t k_multiple = m == Method::int8 ? 64 : 128;
    if (n <= 0 || k <= 0) return "the matrix is empty";
    if (n % 32 != 0 || k % k_multiple != 0)
        return std::string(m == Method::int8 ? "AMXINT8" : "AMXINT4") + " needs rows (n) % 32 == 0 and columns (k) % " +
               std::to_string(k_multiple) + " == 0, got n = " + std::to_string(n) + ", k = " + std::to_string(k);
    return {};
}

std::int64_t tile_word_offset(Method m, std::int64_t n, std::int64_t k, std::int64_t r, std::int64_t tile,
                              std::int64_t g) noexcept {
    const LayoutConstants c = constants(m);
    const std::int64_t nb = r / c.n_block * c.n_block;
    const std::int64_t nbs = std::min(c.n_block, n - nb);
    const std::int64_t col = tile * c.tile_k;
    const std::int64_t kb = col / c.k_block * c.k_block;
    const std::int64_t kbs = std::min(c.k_block, k - kb);
    const std::int64_t ns = (r - nb) / c.n_step * c.n_step;
    const std::int64_t i = r - nb - ns;  // row within the row group, 0..31
    const std::int64_t kt = col - kb;
    // Elements before the tile (always even, so halving for INT4 is exact).
    const std::int64_t elements = nb * k + kb * nbs + ns * kbs + kt * c.n_step;
    const std::int64_t tile_base = m == Method::int8 ? elements : elements / 2;
    return tile_base + (i / 16) * 1024 + g * 64 + (i % 16) * 4;
}

void pack_codes(Method m, std::int64_t n, std::int64_t k, const std::int8_t* codes, std::uint8_t* out) noexcept {
    const std::int64_t tile_k = constants(m).tile_k;
    for (std::int64_t r = 0; r < n; ++r) {
        const std::int8_t* row = codes + r * k;
        for (std::int64_t t = 0; t < k / tile_k; ++t)
            for (std::int64_t g = 0; g < 16; ++g) {
                std::uint8_t* word = out + tile_word_offset(m, n, k, r, t, g);
                for (std::int64_t b = 0; b < 4; ++b) {
                    const std::int64_t j = g * 4 + b;  // byte within the row's 64-byte tile row
                    if (m == Method::int8) {
                        word[b] = static_cast<std::uint8_t>(row[t * 64 + j]);
                    } else {  // columns j and j + 64 of the tile in the low and high nibble
                        const auto lo = static_cast<std::uint8_t>(row[t * 128 + j] & 0xF);
                        const auto hi = static_cast<std::uint8_t>(row[t * 128 + 64 + j] & 0xF);
                        word[b] = static_cast<std::uint8_t>(lo | hi << 4);
                    }
                }
            }
    }
}

}  // namespace moequant::amx
