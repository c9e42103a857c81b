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

}  // namespace moequant::moe_int
