// AVX2 building blocks shared by the AVX2 kernel files: each converts 8 lanes exactly like the
// scalar reference (dtype_convert.cpp). Include only from files compiled with the AVX2 flags.
//
// Everything here has internal linkage: an inline function compiled with AVX2 flags must never
// be merged by the linker with a copy that baseline code calls.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace moequant::kernels::avx2::lanes {
namespace {

inline __m256i splat(std::uint32_t value) { return _mm256_set1_epi32(static_cast<int>(value)); }

// Sets the quiet bit of the NaN lanes (F32 bits); other lanes pass unchanged.
inline __m256i quiet_nans(__m256i bits) {
    const __m256i magnitude = _mm256_and_si256(bits, splat(0x7FFFFFFF));
    const __m256i is_nan = _mm256_cmpgt_epi32(magnitude, splat(0x7F800000));
    return _mm256_or_si256(bits, _mm256_and_si256(is_nan, splat(0x00400000)));
}

// 8 BF16 values -> F32 bits.
inline __m256i bf16_to_f32(__m128i bf16) {
    return quiet_nans(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bf16), 16));
}

// 8 F32 values -> BF16 codes, one per 32-bit lane. Integer rounding: no FTZ/DAZ, no BF16 unit.
inline __m256i f32_to_bf16_lanes(__m256 values) {
    const __m256i bits = _mm256_castps_si256(values);
    const __m256i kept_lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), splat(1));
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(bits, splat(0x7FFF)), kept_lsb), 16);
    const __m256i quieted = _mm256_or_si256(_mm256_srli_epi32(bits, 16), splat(0x0040));
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, splat(0x7FFFFFFF)), splat(0x7F800000));
    return _mm256_blendv_epi8(rounded, quieted, is_nan);
}

// Eight 32-bit lanes holding values <= 0xFFFF -> eight u16, in order.
inline __m128i narrow_to_u16(__m256i lanes) {
    return _mm_packus_epi32(_mm256_castsi256_si128(lanes), _mm256_extracti128_si256(lanes, 1));
}

inline __m128i f32_to_bf16(__m256 values) { return narrow_to_u16(f32_to_bf16_lanes(values)); }

// 8 F16 values -> F32 bits. The hardware conversion is exact (subnormals included, MXCSR.DAZ
// ignored); the NaN lanes get the quiet bit explicitly so the rule does not rest on it.
inline __m256i f16_to_f32(__m128i f16) {
    return quiet_nans(_mm256_castps_si256(_mm256_cvtph_ps(f16)));
}

// 8 F32 values -> 8 F16 codes. Hardware rounding to nearest even (subnormal results kept,
// MXCSR.FTZ ignored); NaN lanes are rebuilt as sign | 0x7E00 | top payload bits.
inline __m128i f32_to_f16(__m256 values) {
    const __m128i rounded = _mm256_cvtps_ph(values, _MM_FROUND_TO_NEAREST_INT);
    const __m256i bits = _mm256_castps_si256(values);
    const __m256i magnitude = _mm256_and_si256(bits, splat(0x7FFFFFFF));
    const __m256i is_nan = _mm256_cmpgt_epi32(magnitude, splat(0x7F800000));
    const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(bits, 16), splat(0x8000));
    const __m256i payload = _mm256_and_si256(_mm256_srli_epi32(magnitude, 13), splat(0x3FF));
    const __m256i nan_code = _mm256_or_si256(_mm256_or_si256(sign, splat(0x7E00)), payload);
    const __m128i nan_mask16 =
        _mm_packs_epi32(_mm256_castsi256_si128(is_nan), _mm256_extracti128_si256(is_nan, 1));
    return _mm_blendv_epi8(rounded, narrow_to_u16(nan_code), nan_mask16);
}

// 8 F8_E4M3 bytes (low 64 bits) -> F32 bits. Subnormals go through an exact integer-to-float
// conversion and a multiply by 2^-9 whose operands and result are normal, so DAZ/FTZ cannot
// touch them.
inline __m256i f8_e4m3_to_f32(__m128i bytes) {
    const __m256i v = _mm256_cvtepu8_epi32(bytes);
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(v, splat(0x80)), 24);
    const __m256i magnitude = _mm256_and_si256(v, splat(0x7F));
    const __m256i normal = _mm256_add_epi32(_mm256_slli_epi32(magnitude, 20), splat(120u << 23));
    const __m256i subnormal = _mm256_castps_si256(
        _mm256_mul_ps(_mm256_cvtepi32_ps(magnitude), _mm256_set1_ps(1.0f / 512.0f)));
    const __m256i is_subnormal = _mm256_cmpgt_epi32(splat(8), magnitude);
    const __m256i is_nan = _mm256_cmpeq_epi32(magnitude, splat(0x7F));
    __m256i bits = _mm256_blendv_epi8(normal, subnormal, is_subnormal);
    bits = _mm256_blendv_epi8(bits, splat(0x7FC00000), is_nan);
    return _mm256_or_si256(bits, sign);
}

// 8 F8_E5M2 bytes (low 64 bits) -> F32 bits: each byte is the upper half of an F16.
inline __m256i f8_e5m2_to_f32(__m128i bytes) {
    return f16_to_f32(_mm_slli_epi16(_mm_cvtepu8_epi16(bytes), 8));
}

// 8 F8_E8M0 bytes (low 64 bits) -> F32 bits: 2^(e-127); e = 0 is the subnormal 2^-127.
inline __m256i f8_e8m0_to_f32(__m128i bytes) {
    const __m256i v = _mm256_cvtepu8_epi32(bytes);
    __m256i bits = _mm256_slli_epi32(v, 23);
    bits = _mm256_blendv_epi8(bits, splat(0x00400000), _mm256_cmpeq_epi32(v, _mm256_setzero_si256()));
    return _mm256_blendv_epi8(bits, splat(0x7FC00000), _mm256_cmpeq_epi32(v, splat(0xFF)));
}

inline __m128i load_8_bytes(const std::byte* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }
inline __m128i load_16_bytes(const std::byte* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline void store_16_bytes(std::byte* p, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }
inline void store_32_bytes(std::byte* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }

// Runs step(in, out) on every full group of `lanes` elements, then once more on a zero-padded
// copy of the remaining elements, so the tail takes the same vector path and nothing outside
// [0, n) is read or written.
template <std::size_t lanes, std::size_t in_size, std::size_t out_size, class Step>
inline void for_each_group(const std::byte* src, std::byte* dst, std::size_t n, Step step) {
    std::size_t i = 0;
    for (; i + lanes <= n; i += lanes) step(src + i * in_size, dst + i * out_size);
    if (i == n) return;
    const std::size_t rest = n - i;
    alignas(32) std::byte in[lanes * in_size] = {};
    alignas(32) std::byte out[lanes * out_size];
    std::memcpy(in, src + i * in_size, rest * in_size);
    step(in, out);
    std::memcpy(dst + i * out_size, out, rest * out_size);
}

}  // namespace
}  // namespace moequant::kernels::avx2::lanes
