// The K-quants' sub-block searches (quant_search.hpp) run on many sub-blocks at once, one
// sub-block per SIMD lane. Each lane performs the scalar search's float operations in the
// scalar order (sums stay sequential over the sub-block's values, no fused multiply-adds, the
// same rounding trick and comparisons), so every result is bit-identical to the scalar search;
// only independent sub-blocks share an instruction. Q8_0's blocks and Q4_K/Q5_K's requantizing
// are element-wise: there each lane is one value, with the same operations as the scalar code.
#pragma once

#include "quant_search.hpp"

#include <cstdint>

namespace moequant::ggml_quants {

// `count` sub-blocks of 32 values, x[32 * k + i]. `weights` in the same layout, or null for
// the plain Q4_K/Q5_K weights sqrt(mean x^2) + |x| of each sub-block. `flat_when_below` picks
// qkx3's flat test (max <= min) over qkx2's (max == min). Writes levels[32 * k + i], scales[k]
// and negated_mins[k] as the scalar search would for each sub-block.
using OffsetLanes = void (*)(int count, int nmax, const float* x, const float* weights, bool flat_when_below,
                             OffsetSearch search, std::uint8_t* levels, float* scales, float* negated_mins);

// symmetric_levels (make_qx_quants) on `count` sub-blocks of 16 values, x[16 * k + i], weights
// in the same layout or null for x^2. Writes levels[16 * k + i] and scales[k] as the scalar
// search would for each sub-block.
using SymmetricLanes = void (*)(int count, int nmax, const float* x, const float* weights, std::int8_t* levels,
                                float* scales);

// Q8_0 (ggml's quantize_row_q8_0_ref) on `blocks` blocks of 32 values: writes the 32 level
// bytes of block b at out[34 * b + 2] and its scale d at scales[b], leaving the two fp16 bytes
// of each block to the caller; W values per instruction, bit for bit the scalar arithmetic.
using Q8Blocks = void (*)(std::int64_t blocks, const float* x, std::uint8_t* out, float* scales);

// Q4_K / Q5_K's requantizing of one super-block (k_rows.cpp's scale_min_finish): for each of its
// 8 sub-blocks j with ds[j] != 0, levels[32 j + i] = clamp(nearest_int((x + dm[j]) / ds[j]), 0,
// nmax), bit for bit the scalar arithmetic; sub-blocks with ds[j] == 0 keep their levels.
using OffsetRequantize = void (*)(const float* x, const float* ds, const float* dm, int nmax, std::uint8_t* levels);

// Q6_K's requantizing of one super-block (k_rows.cpp's q6_finish): for each of its 16
// sub-blocks j with ds[j] != 0, levels[16 j + i] = clamp(nearest_int(x / ds[j]), -nmax,
// nmax - 1) + nmax, bit for bit the scalar arithmetic; sub-blocks with ds[j] == 0 keep their
// levels.
using SymmetricRequantize = void (*)(const float* x, const float* ds, int nmax, std::int8_t* levels);

// The lane kernels of the active ISA (moequant/cpu_isa.hpp), or null where only the scalar
// search runs (the CPU or MOEQUANT_ISA / set_isa_limit allows no vector path).
OffsetLanes active_offset_lanes() noexcept;
SymmetricLanes active_symmetric_lanes() noexcept;
Q8Blocks active_q8_0_blocks() noexcept;
OffsetRequantize active_offset_requantize() noexcept;
SymmetricRequantize active_symmetric_requantize() noexcept;

namespace lanes_avx2 {
void offset_levels_32(int count, int nmax, const float* x, const float* weights, bool flat_when_below, OffsetSearch search,
                      std::uint8_t* levels, float* scales, float* negated_mins);
void symmetric_levels_16(int count, int nmax, const float* x, const float* weights, std::int8_t* levels, float* scales);
void q8_0_blocks(std::int64_t blocks, const float* x, std::uint8_t* out, float* scales);
void offset_requantize_8x32(const float* x, const float* ds, const float* dm, int nmax, std::uint8_t* levels);
void symmetric_requantize_16x16(const float* x, const float* ds, int nmax, std::int8_t* levels);
}
namespace lanes_avx512 {
void offset_levels_32(int count, int nmax, const float* x, const float* weights, bool flat_when_below, OffsetSearch search,
                      std::uint8_t* levels, float* scales, float* negated_mins);
void symmetric_levels_16(int count, int nmax, const float* x, const float* weights, std::int8_t* levels, float* scales);
void q8_0_blocks(std::int64_t blocks, const float* x, std::uint8_t* out, float* scales);
void offset_requantize_8x32(const float* x, const float* ds, const float* dm, int nmax, std::uint8_t* levels);
void symmetric_requantize_16x16(const float* x, const float* ds, int nmax, std::int8_t* levels);
}

}  // namespace moequant::ggml_quants
