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
void bf16_to_f32(const std::byte* src, float* dst, std::size_t n) noexcept;
void f32_to_bf16(const float* src, std::byte* dst, std::size_t n) noexcept;
void f16_to_f32(const std::byte* src, float* dst, std::size_t n) noexcept;
void f32_to_f16(const float* src, std::byte* dst, std::size_t n) noexcept;
void f8_e4m3_to_f32(const std::byte* src, float* dst, std::size_t n) noexcept;
void f8_e5m2_to_f32(const std::byte* src, float* dst, std::size_t n) noexcept;
void f8_e8m0_to_f32(const std::byte* src, float* dst, std::size_t n) noexcept;

// dst[j] = f32_to_bf16(decode(src[j]) * column_scale[j]): one row of FP8 block dequantization
// with the block scales already spread over the columns.
void f8_e4m3_scaled_to_bf16(const std::byte* src, const float* column_scale, std::uint16_t* dst,
                            std::size_t n) noexcept;
void f8_e5m2_scaled_to_bf16(const std::byte* src, const float* column_scale, std::uint16_t* dst,
                            std::size_t n) noexcept;
}  // namespace avx2

// The tests compile the AVX-512 files a second time over an emulation (tests/emulation), under
// another namespace name so both copies can live in one program.
#ifndef MOEQUANT_AVX512_KERNELS
#define MOEQUANT_AVX512_KERNELS avx512
#endif

namespace MOEQUANT_AVX512_KERNELS {
void bf16_to_f32(const std::byte* src, float* dst, std::size_t n) noexcept;
void f32_to_bf16(const float* src, std::byte* dst, std::size_t n) noexcept;
void f16_to_f32(const std::byte* src, float* dst, std::size_t n) noexcept;
void f32_to_f16(const float* src, std::byte* dst, std::size_t n) noexcept;
void f8_e4m3_to_f32(const std::byte* src, float* dst, std::size_t n) noexcept;
void f8_e5m2_to_f32(const std::byte* src, float* dst, std::size_t n) noexcept;
void f8_e8m0_to_f32(const std::byte* src, float* dst, std::size_t n) noexcept;

void f8_e4m3_scaled_to_bf16(const std::byte* src, const float* column_scale, std::uint16_t* dst,
                            std::size_t n) noexcept;
void f8_e5m2_scaled_to_bf16(const std::byte* src, const float* column_scale, std::uint16_t* dst,
                            std::size_t n) noexcept;
}  // namespace MOEQUANT_AVX512_KERNELS

}  // namespace moequant::kernels
