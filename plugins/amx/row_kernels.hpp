// Per-row arithmetic of the AMX quantizers (kt-cpu-format.md §3), in a scalar and vector
// versions chosen at run time; every version produces the same bytes.
#pragma once

#include <moequant/cpu_isa.hpp>

#include <cstddef>
#include <cstdint>

namespace moequant::amx {

struct RowKernels {
    // max |x| over the k BF16 values of a row (exact), taken on the 15 magnitude bits, which
    // order like the values do. `row` may be unaligned.
    float (*amax)(const std::byte* row, std::size_t k) noexcept;
    // INT8 codes in column order: clamp(rne(fl32(x * inv)), -128, 127), with x86 conversion
    // semantics (values out of int32 range, and NaN, become -128).
    void (*quantize_int8)(const std::byte* row, std::size_t k, float inv, std::int8_t* codes) noexcept;
    // INT4 in tile order: t as for INT8, rounded to a multiple of 16 with ties away from zero,
    // q = t / 16 in [-8, 7]; byte j of 128-column tile T holds column T*128 + j in its low
    // nibble and column T*128 + 64 + j in its high nibble (k/2 bytes in all).
    void (*quantize_int4)(const std::byte* row, std::size_t k, float inv, std::uint8_t* bytes) noexcept;
    // One 1024-byte tile panel: 16 rows of 64 bytes (row i at rows + i * row_stride) become 16
    // lines of 64 bytes where line g holds the 4-byte word g of each row in row order (the
    // 16x16 transpose of 32-bit words that gives the AMX B-tile order).
    // Panels are written with streaming stores where the ISA has them (the output is written
    // once and not read back soon); call this once after the last panel of a thread.
    void (*transpose_panel)(const std::uint8_t* rows, std::size_t row_stride, std::uint8_t* panel) noexcept;
    void (*finish_panels)() noexcept;
};

const RowKernels& row_kernels(Isa isa) noexcept;

namespace {
// The largest of the per-lane BF16 magnitudes a vector amax leaves, as the F32 it stands for.
// Internal linkage: the vector files compile it with their ISA flags, and the linker must never
// hand one file's copy to another.
inline float max_lane_as_float(const std::uint16_t* lanes, std::size_t count) noexcept {
    std::uint16_t result = 0;
    for (std::size_t i = 0; i < count; ++i) result = lanes[i] > result ? lanes[i] : result;
    float out;
    const std::uint32_t bits = static_cast<std::uint32_t>(result) << 16;
    __builtin_memcpy(&out, &bits, 4);
    return out;
}
}  // namespace

// Defined in row_kernels_scalar.cpp, row_kernels_avx2.cpp and row_kernels_avx512.cpp (the last
// two compiled with their ISA flags).
extern const RowKernels scalar_row_kernels;
extern const RowKernels avx2_row_kernels;
extern const RowKernels avx512_row_kernels;

}  // namespace moequant::amx
