// Private declarations of the vector kernels (one namespace per ISA tier, see cpu_isa.hpp).
//
// Each function is defined in a file compiled with that tier's instruction-set flags, so it may
// only be called after active_isa() has said the CPU supports the tier. Every kernel produces
// exactly the bits of the scalar reference in dtype_convert.hpp; sources and destinations may
// be unaligned and n is any element count (tails are handled inside).
#pragma once

#include <cstddef>
#include <cstdint>

namespace moequant::kernels {

namespace avx2 {
#include "kernels/kernel_entries.inc"
}  // namespace avx2

// The tests compile the AVX-512 files a second time over an emulation (tests/emulation), under
// another namespace name so both copies can live in one program.
#ifndef MOEQUANT_AVX512_KERNELS
#define MOEQUANT_AVX512_KERNELS avx512
#endif

namespace MOEQUANT_AVX512_KERNELS {
#include "kernels/kernel_entries.inc"
}  // namespace MOEQUANT_AVX512_KERNELS

}  // namespace moequant::kernels
