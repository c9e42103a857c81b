// AVX2 versions of the row kernels (compiled with -mavx2 -mfma; called only after the run-time
// CPU check). Same IEEE operations as the scalar code: one float multiply, conversion with
// round-to-nearest-even, signed saturation.
#include "row_kernels.hpp"

#include <immintrin.h>

#include <cstdint>

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
    const __m256i magnitude = _mm256_set1_epi16(0x7FFF);
    __m256i m0 = _mm256_setzero_si256(), m1 = m0;
    for (std::size_t c = 0; c < k; c += 32) {  // k is a multiple of 64 for every packable matrix
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c));
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c + 32));
        m0 = _mm256_max_epu16(m0, _mm256_and_si256(a, magnitude));
        m1 = _mm256_max_epu16(m1, _mm256_and_si256(b, magnitude));
    }
    alignas(32) std::uint16_t lanes[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_max_epu16(m0, m1));
    return max_lane_as_float(lanes, 16);
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

// 8x8 transpose of 32-bit words: in[r] (8 words of row r) -> out[c] (word c of rows 0..7).
void transpose8(__m256i& r0, __m256i& r1, __m256i& r2, __m256i& r3, __m256i& r4, __m256i& r5, __m256i& r6,
                __m256i& r7) noexcept {
    const __m256i t0 = _mm256_unpacklo_epi32(r0, r1), t1 = _mm256_unpackhi_epi32(r0, r1);
    const __m256i t2 = _mm256_unpacklo_epi32(r2, r3), t3 = _mm256_unpackhi_epi32(r2, r3);
    const __m256i t4 = _mm256_unpacklo_epi32(r4, r5), t5 = _mm256_unpackhi_epi32(r4, r5);
    const __m256i t6 = _mm256_unpacklo_epi32(r6, r7), t7 = _mm256_unpackhi_epi32(r6, r7);
    const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    const __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
    const __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
    r0 = _mm256_permute2x128_si256(u0, u4, 0x20);
    r1 = _mm256_permute2x128_si256(u1, u5, 0x20);
    r2 = _mm256_permute2x128_si256(u2, u6, 0x20);
    r3 = _mm256_permute2x128_si256(u3, u7, 0x20);
    r4 = _mm256_permute2x128_si256(u0, u4, 0x31);
    r5 = _mm256_permute2x128_si256(u1, u5, 0x31);
    r6 = _mm256_permute2x128_si256(u2, u6, 0x31);
    r7 = _mm256_permute2x128_si256(u3, u7, 0x31);
}

void transpose_panel(const std::uint8_t* rows, std::size_t row_stride, std::uint8_t* panel) noexcept {
    // For each half of the 16 words: transpose rows 0-7 and rows 8-15 as 8x8 blocks, then write
    // each output line whole (its first 32 bytes from rows 0-7, the next 32 from rows 8-15).
    const bool aligned = reinterpret_cast<std::uintptr_t>(panel) % 32 == 0;
    for (int word_half = 0; word_half < 2; ++word_half) {
        __m256i a[8], b[8];
        for (int i = 0; i < 8; ++i) {
            a[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows + i * row_stride + word_half * 32));
            b[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows + (8 + i) * row_stride + word_half * 32));
        }
        transpose8(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
        transpose8(b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]);
        for (int g = 0; g < 8; ++g) {
            auto* line = reinterpret_cast<__m256i*>(panel + (word_half * 8 + g) * 64);
            // Streaming stores skip reading the destination lines first (they are fully
            // overwritten); they need 32-byte alignment, which panels in a Tensor have.
            if (aligned) {
                _mm256_stream_si256(line, a[g]);
                _mm256_stream_si256(line + 1, b[g]);
            } else {
                _mm256_storeu_si256(line, a[g]);
                _mm256_storeu_si256(line + 1, b[g]);
            }
        }
    }
}

void finish_panels() noexcept { _mm_sfence(); }

}  // namespace

const RowKernels avx2_row_kernels{&amax, &quantize_int8, &quantize_int4, &transpose_panel, &finish_panels};

}  // namespace moequant::amx
