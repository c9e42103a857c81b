// Picks the lane kernels for the ISA in use.
#include "k_lanes.hpp"

#include <moequant/cpu_isa.hpp>

namespace moequant::ggml_quants {

OffsetLanes active_offset_lanes() noexcept {
    switch (active_isa()) {
    case Isa::avx512: return lanes_avx512::offset_levels_32;
    case Isa::avx2: return lanes_avx2::offset_levels_32;
    default: return nullptr;
    }
}

SymmetricLanes active_symmetric_lanes() noexcept {
    switch (active_isa()) {
    case Isa::avx512: return lanes_avx512::symmetric_levels_16;
    case Isa::avx2: return lanes_avx2::symmetric_levels_16;
    default: return nullptr;
    }
}

Q8Blocks active_q8_0_blocks() noexcept {
    switch (active_isa()) {
    case Isa::avx512: return lanes_avx512::q8_0_blocks;
    case Isa::avx2: return lanes_avx2::q8_0_blocks;
    default: return nullptr;
    }
}

OffsetRequantize active_offset_requantize() noexcept {
    switch (active_isa()) {
    case Isa::avx512: return lanes_avx512::offset_requantize_8x32;
    case Isa::avx2: return lanes_avx2::offset_requantize_8x32;
    default: return nullptr;
    }
}

SymmetricRequantize active_symmetric_requantize() noexcept {
    switch (active_isa()) {
    case Isa::avx512: return lanes_avx512::symmetric_requantize_16x16;
    case Isa::avx2: return lanes_avx2::symmetric_requantize_16x16;
    default: return nullptr;
    }
}

}  // namespace moequant::ggml_quants
