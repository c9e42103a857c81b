// Exact element conversions between the floating formats moequant reads and writes.
//
// The scalar functions below *define* each conversion; the bulk functions run vectorised
// (AVX-512 / AVX2 / scalar, picked at run time, see cpu_isa.hpp) and produce exactly the same
// bits. Rules (model-families.md §4.1, conventions.md §3):
//  - narrowing (F32 → BF16, F32 → F16) rounds to nearest, ties to even; subnormals are kept
//    (no flush to zero); F16 overflow becomes ±Inf;
//  - a NaN always comes out as a quiet NaN with its sign kept (never Inf): the quiet bit is set
//    and the top payload bits that fit are kept;
//  - widening to F32 is exact;
//  - F8_E4M3 (E4M3FN): bias 7, no Inf, 0x7F/0xFF are NaN; F8_E5M2: bias 15, IEEE-like
//    (it is the upper byte of an F16); F8_E8M0: 2^(e-127), 0xFF is NaN (positive);
//    F8_E4M3FNUZ / F8_E5M2FNUZ: bias 8 / 16, no Inf, no -0, 0x80 is NaN (positive).
// Bulk sources and destinations may be unaligned; n counts elements.
#pragma once

#include <moequant/export.hpp>
#include <moequant/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace moequant {

// ---- one value (the reference definitions) ----
MOEQUANT_API float bf16_to_f32(std::uint16_t bits) noexcept;
MOEQUANT_API std::uint16_t f32_to_bf16(float value) noexcept;
MOEQUANT_API float f16_to_f32(std::uint16_t bits) noexcept;
MOEQUANT_API std::uint16_t f32_to_f16(float value) noexcept;
MOEQUANT_API float f8_e4m3_to_f32(std::uint8_t bits) noexcept;
MOEQUANT_API float f8_e5m2_to_f32(std::uint8_t bits) noexcept;
MOEQUANT_API float f8_e8m0_to_f32(std::uint8_t bits) noexcept;
MOEQUANT_API float f8_e4m3fnuz_to_f32(std::uint8_t bits) noexcept;
MOEQUANT_API float f8_e5m2fnuz_to_f32(std::uint8_t bits) noexcept;

// F32 -> F8_E4M3 (E4M3FN), round to nearest even, saturating: finite values and infinities
// beyond ±448 become ±448 (the OCP "satfinite" mode; PyTorch would give NaN from 480 up, which
// scale-based quantizers never reach); NaN -> 0x7F with the sign. Used to synthesize FP8
// checkpoints; not vectorised.
MOEQUANT_API std::uint8_t f32_to_f8_e4m3(float value) noexcept;

// ---- bulk, vectorised ----
MOEQUANT_API void convert_bf16_to_f32(const void* src, float* dst, std::size_t n) noexcept;
MOEQUANT_API void convert_f32_to_bf16(const float* src, void* dst, std::size_t n) noexcept;
MOEQUANT_API void convert_f16_to_f32(const void* src, float* dst, std::size_t n) noexcept;
MOEQUANT_API void convert_f32_to_f16(const float* src, void* dst, std::size_t n) noexcept;
MOEQUANT_API void convert_f8_e4m3_to_f32(const void* src, float* dst, std::size_t n) noexcept;
MOEQUANT_API void convert_f8_e5m2_to_f32(const void* src, float* dst, std::size_t n) noexcept;
MOEQUANT_API void convert_f8_e8m0_to_f32(const void* src, float* dst, std::size_t n) noexcept;

// Decodes a view of any float dtype with a defined conversion (F32, F16, BF16, F64 rounded to
// nearest, the five FP8 types) into F32. Throws Error(input) for other dtypes or when
// dst.size() != src.elements().
MOEQUANT_API void decode_to_f32(const TensorView& src, std::span<float> dst);

// The same into BF16 bits: BF16 is copied, FP8 is exact, F32 and F16 are rounded once; F64 is
// rounded to F32 first and then to BF16 (two roundings).
MOEQUANT_API void decode_to_bf16(const TensorView& src, std::span<std::uint16_t> dst);

}  // namespace moequant
