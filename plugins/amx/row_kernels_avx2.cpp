// AVX2 versions of the row kernels (compiled with -mavx2 -mfma; called only after the run-time
// CPU check). Same IEEE operations as the scalar code: one float multiply, conversion with
// round-to-nearest-even, signed saturation.
#include "row_kernels.hpp"

#include <immintrin.h>

namespace moequant::amx {
namespace {

__m256 load8_bf16(const std::byte* p) noexcept {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// 32 values -> 32 saturated int8 in column order.
__m256i quantize32(const std::byte* p, __m256 inv) noexcept {
    const __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(load8_bf16(p), inv));
    const __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(load8_bf16(p + 16), inv));
    const __m256i c = _mm256_cvtps_epi32(_mm256_mul_ps(load8_bf16(p + 32), inv));
    const __m256i d = _mm256_cvtps_epi32(_mm256_mul_ps(load8_bf16(p + 48), inv));
    // The packs work per 128-bit lane; the permute puts the 4-byte groups back in order.
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
    return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// int8 t -> 4-bit q = t rounded to a multiple of 16 (ties away from zero) / 16, in the low nibble.
__m256i int4_nibbles(__m256i t) noexcept {
    const __m256i magnitude = _mm256_abs_epi8(t);  // -128 -> 0x80, read as unsigned 128
    const __m256i rounded = _mm256_and_si256(_mm256_add_epi8(magnitude, _mm256_set1_epi8(8)), _mm256_set1_epi8(static_cast<char>(0xF0)));
    const __m256i m = _mm256_and_si256(_mm256_srli_epi16(rounded, 4), _mm256_set1_epi8(0x0F));
    return _mm256_and_si256(_mm256_sign_epi8(m, t), _mm256_set1_epi8(0x0F));
}

float amax(const std::byte* row, std::size_t k) noexcept {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    __m256 m0 = _mm256_setzero_ps(), m1 = m0, m2 = m0, m3 = m0;
    std::size_t c = 0;
    for (; c + 32 <= k; c += 32) {
        m0 = _mm256_max_ps(_mm256_and_ps(load8_bf16(row + 2 * c), abs_mask), m0);
        m1 = _mm256_max_ps(_mm256_and_ps(load8_bf16(row + 2 * c + 16), abs_mask), m1);
        m2 = _mm256_max_ps(_mm256_and_ps(load8_bf16(row + 2 * c + 32), abs_mask), m2);
        m3 = _mm256_max_ps(_mm256_and_ps(load8_bf16(row + 2 * c + 48), abs_mask), m3);
    }
    for (; c + 8 <= k; c += 8) m0 = _mm256_max_ps(_mm256_and_ps(load8_bf16(row + 2 * c), abs_mask), m0);
    __m256 m = _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, m);
    float result = 0.0f;
    for (float v : lanes) result = v > result ? v : result;
    return result;  // k is a multiple of 64 for every packable matrix: no tail
}

void quantize_int8(const std::byte* row, std::size_t k, float inv, std::int8_t* codes) noexcept {
    const __m256 vinv = _mm256_set1_ps(inv);
    for (std::size_t c = 0; c < k; c += 32)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + c), quantize32(row + 2 * c, vinv));
}

void quantize_int4(const std::byte* row, std::size_t k, float inv, std::uint8_t* bytes) noexcept {
    const __m256 vinv = _mm256_set1_ps(inv);
    for (std::size_t tile = 0; tile < k / 128; ++tile) {
        const std::byte* p = row + 2 * tile * 128;
        for (std::size_t half = 0; half < 2; ++half) {  // bytes j = 32*half .. 32*half+31
            const __m256i lo = int4_nibbles(quantize32(p + 2 * (32 * half), vinv));
            const __m256i hi = int4_nibbles(quantize32(p + 2 * (64 + 32 * half), vinv));
            const __m256i packed = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));  // hi < 16: no carry across bytes
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(bytes + tile * 64 + 32 * half), packed);
        }
    }
}

}  // namespace

const RowKernels avx2_row_kernels{&amax, &quantize_int8, &quantize_int4};

}  // namespace moequant::amx
