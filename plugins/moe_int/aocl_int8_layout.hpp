// The int8 "reordered B" layout of AMD AOCL-BLAS's s8s8s32os32 GEMM, as kt-kernel's MOE_INT8
// stores each block of output rows (aocl_reorder_s8s8s32os32('c', 'n', 'B', ...) of a K x NB
// column-major block, NB a multiple of 16 and at most 64; docs/kt-moe-int8.md):
//
//   codes   [roundup(K, 4) / 4][NB][4]   int8, the K positions beyond K zero
//   colsums [NB]                         int32 little-endian, 128 * sum over K of the row's codes
//
// (the sums let the GEMM, which makes the activations unsigned by adding 128, take that back).
#pragma once

#include <cstdint>
#include <cstring>

namespace moequant::moe_int {

// Bytes of one block of `rows` output rows (NB) over `k` inputs: codes, then the column sums.
constexpr std::int64_t aocl_block_bytes(std::int64_t rows, std::int64_t k) noexcept {
    return ((k + 3) / 4 * 4) * rows + 4 * rows;
}

// Offset within a block of row `row`'s code for input `kk`.
constexpr std::int64_t aocl_code_offset(std::int64_t rows, std::int64_t row, std::int64_t kk) noexcept {
    return (kk / 4) * rows * 4 + row * 4 + kk % 4;
}

// Offset within a block of row `row`'s column sum.
constexpr std::int64_t aocl_colsum_offset(std::int64_t rows, std::int64_t k, std::int64_t row) noexcept {
    return ((k + 3) / 4 * 4) * rows + 4 * row;
}

// Writes row `row`'s k codes into a block of `rows` rows, and its column sum (computed in
// uint32 so that it wraps like the int32 AOCL keeps). The padding past k is left as it is (the
// callers' blocks start zeroed).
inline void write_aocl_row(std::uint8_t* block, std::int64_t rows, std::int64_t k, std::int64_t row, const std::int8_t* codes) noexcept {
    std::uint32_t sum = 0;
    for (std::int64_t c = 0; c < k; ++c) {
        block[aocl_code_offset(rows, row, c)] = static_cast<std::uint8_t>(codes[c]);
        sum += static_cast<std::uint32_t>(static_cast<std::int32_t>(codes[c]));
    }
    const std::uint32_t colsum = sum * 128u;
    std::memcpy(block + aocl_colsum_offset(rows, k, row), &colsum, 4);
}

}  // namespace moequant::moe_int
