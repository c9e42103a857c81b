// AVX-512 building blocks shared by the AVX-512 kernel files: each converts 16 lanes exactly
// like the scalar reference (dtype_convert.cpp). Include only from files compiled with the
// AVX-512 F/BW/VL/DQ flags. Tails use masked loads and stores (masked-off bytes are neither
// read nor written, so a vector may end past the data).
//
// Everything here has internal linkage: an inline function compiled with AVX-512 flags must
// never be merged by the linker with a copy that baseline code calls.
#pragma once

// GCC 12's AVX-512 intrinsics start from a self-initialised "undefined" vector, which
// -Wmaybe-uninitialized reports wherever they are inlined (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include "kernels/kernels.hpp"

#include <cstddef>
#include <cstdint>

namespace moequant::kernels::MOEQUANT_AVX512_KERNELS::lanes {
namespace {

inline __m512i splat(std::uint32_t value) { return _mm512_set1_epi32(static_cast<int>(value)); }

// Mask of the first `count` (< 16) lanes.
inline __mmask16 first_lanes(std::size_t count) { return static_cast<__mmask16>((1u << count) - 1u); }

inline __mmask16 nan_lanes(__m512i bits) {
    return _mm512_cmpgt_epi32_mask(_mm512_and_si512(bits, splat(0x7FFFFFFF)), splat(0x7F800000));
}

// Sets the quiet bit of the NaN lanes (F32 bits); other lanes pass unchanged.
inline __m512i quiet_nans(__m512i bits) {
    return _mm512_mask_or_epi32(bits, nan_lanes(bits), bits, splat(0x00400000));
}

// 16 BF16 values -> F32 bits.
inline __m512i bf16_to_f32(__m256i bf16) {
    return quiet_nans(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bf16), 16));
}

// 16 F32 values -> 16 BF16 codes. Integer rounding on purpose: AVX512-BF16's vcvtneps2bf16
// flushes subnormals to zero.
inline __m256i f32_to_bf16(__m512 values) {
    const __m512i bits = _mm512_castps_si512(values);
    const __m512i kept_lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), splat(1));
    const __m512i rounded =
        _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(bits, splat(0x7FFF)), kept_lsb), 16);
    const __m512i quieted = _mm512_or_si512(_mm512_srli_epi32(bits, 16), splat(0x0040));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan_lanes(bits), rounded, quieted));
}

// 16 F16 values -> F32 bits. The hardware conversion is exact (subnormals included, MXCSR.DAZ
// ignored); the NaN lanes get the quiet bit explicitly so the rule does not rest on it.
inline __m512i f16_to_f32(__m256i f16) { return quiet_nans(_mm512_castps_si512(_mm512_cvtph_ps(f16))); }

// 16 F32 values -> 16 F16 codes. Hardware rounding to nearest even (subnormal results kept,
// MXCSR.FTZ ignored); NaN lanes are rebuilt as sign | 0x7E00 | top payload bits.
inline __m256i f32_to_f16(__m512 values) {
    const __m256i rounded = _mm512_cvtps_ph(values, _MM_FROUND_TO_NEAREST_INT);
    const __m512i bits = _mm512_castps_si512(values);
    const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(bits, 16), splat(0x8000));
    const __m512i payload = _mm512_and_si512(_mm512_srli_epi32(bits, 13), splat(0x3FF));
    const __m512i nan_code = _mm512_or_si512(_mm512_or_si512(sign, splat(0x7E00)), payload);
    return _mm256_mask_blend_epi16(nan_lanes(bits), rounded, _mm512_cvtepi32_epi16(nan_code));
}

// 16 F8_E4M3 bytes -> F32 bits. Subnormals go through an exact integer-to-float conversion and
// a multiply by 2^-9 whose operands and result are normal, so DAZ/FTZ cannot touch them.
inline __m512i f8_e4m3_to_f32(__m128i bytes) {
    const __m512i v = _mm512_cvtepu8_epi32(bytes);
    const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(v, splat(0x80)), 24);
    const __m512i magnitude = _mm512_and_si512(v, splat(0x7F));
    const __m512i normal = _mm512_add_epi32(_mm512_slli_epi32(magnitude, 20), splat(120u << 23));
    const __m512i subnormal = _mm512_castps_si512(
        _mm512_mul_ps(_mm512_cvtepi32_ps(magnitude), _mm512_set1_ps(1.0f / 512.0f)));
    __m512i bits = _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(splat(8), magnitude), normal, subnormal);
    bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(magnitude, splat(0x7F)), splat(0x7FC00000));
    return _mm512_or_si512(bits, sign);
}

// 16 F8_E5M2 bytes -> F32 bits: each byte is the upper half of an F16.
inline __m512i f8_e5m2_to_f32(__m128i bytes) {
    return f16_to_f32(_mm256_slli_epi16(_mm256_cvtepu8_epi16(bytes), 8));
}

// 16 F8_E8M0 bytes -> F32 bits: 2^(e-127); e = 0 is the subnormal 2^-127.
inline __m512i f8_e8m0_to_f32(__m128i bytes) {
    const __m512i v = _mm512_cvtepu8_epi32(bytes);
    __m512i bits = _mm512_slli_epi32(v, 23);
    bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(v, _mm512_setzero_si512()), splat(0x00400000));
    return _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(v, splat(0xFF)), splat(0x7FC00000));
}

// Unaligned loads and stores of one group of 16 elements, whole or the first `count` only.
inline __m128i load_16_u8(const std::byte* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline __m128i load_16_u8(const std::byte* p, __mmask16 lanes) { return _mm_maskz_loadu_epi8(lanes, p); }
inline __m256i load_16_u16(const std::byte* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i load_16_u16(const std::byte* p, __mmask16 lanes) { return _mm256_maskz_loadu_epi16(lanes, p); }
inline __m512 load_16_f32(const void* p) { return _mm512_loadu_ps(p); }
inline __m512 load_16_f32(const void* p, __mmask16 lanes) { return _mm512_maskz_loadu_ps(lanes, p); }
inline void store_16_u16(std::byte* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
inline void store_16_u16(std::byte* p, __m256i v, __mmask16 lanes) { _mm256_mask_storeu_epi16(p, lanes, v); }
inline void store_16_f32(void* p, __m512i v) { _mm512_storeu_si512(p, v); }
inline void store_16_f32(void* p, __m512i v, __mmask16 lanes) { _mm512_mask_storeu_epi32(p, lanes, v); }

// Calls step(i) on each full group of 16 and step(i, mask) on the remaining elements.
template <class Step> inline void for_each_group(std::size_t n, Step step) {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) step(i);
    if (i < n) step(i, first_lanes(n - i));
}

}  // namespace
}  // namespace moequant::kernels::MOEQUANT_AVX512_KERNELS::lanes
