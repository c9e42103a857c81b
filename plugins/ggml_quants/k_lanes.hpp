// The K-quants' sub-block searches (quant_search.hpp) run on many sub-blocks at once, one
// sub-block per SIMD lane. Each lane performs the scalar search's float operations in the
// scalar order (sums stay sequential over the sub-block's values, no fused multiply-adds, the
// same rounding trick and comparisons), so every result is bit-identical to the scalar search;
// only independent sub-blocks share an instruction.
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

// The lane kernels of the active ISA (moequant/cpu_isa.hpp), or null where only the scalar
// search runs (the CPU or MOEQUANT_ISA / set_isa_limit allows no vector path).
OffsetLanes active_offset_lanes() noexcept;
SymmetricLanes active_symmetric_lanes() noexcept;

namespace lanes_avx2 {
void offset_levels_32(int count, int nmax, const float* x, const float* weights, bool flat_when_below, OffsetSearch search,
                      std::uint8_t* levels, float* scales, float* negated_mins);
void symmetric_levels_16(int count, int nmax, const float* x, const float* weights, std::int8_t* levels, float* scales);
}
namespace lanes_avx512 {
void offset_levels_32(int count, int nmax, const float* x, const float* weights, bool flat_when_below, OffsetSearch search,
                      std::uint8_t* levels, float* scales, float* negated_mins);
void symmetric_levels_16(int count, int nmax, const float* x, const float* weights, std::int8_t* levels, float* scales);
}

}  // namespace moequant::ggml_quants
