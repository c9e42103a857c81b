// AVX-512 (F, BW, VL, DQ) versions of the row kernels, compiled with those flags and called
// only after the run-time CPU check. Same IEEE operations as the scalar code: one float
// multiply, conversion with round-to-nearest-even (out of range and NaN give INT32_MIN), then
// signed saturation to int8. The tests also compile this file over an emulation
// (tests/emulation) to check it on machines without AVX-512.
#include "row_kernels.hpp"

// GCC 12's AVX-512 intrinsics start from a self-initialised "undefined" vector, which
// -W(maybe-)uninitialized reports wherever they are inlined (GCC bug 105593): off for this file.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

namespace moequant::amx {
namespace {

// 16 BF16 values -> 16 saturated int8 codes in column order.
__m128i quantize16(const std::byte* p, __m512 inv) noexcept {
    const __m256i bf16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m512 values = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bf16), 16));
    return _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(values, inv)));
}

// 64 values from four runs of 16 columns starting at p, p + 16, p + 32 and p + 48 (in values).
__m512i quantize64(const std::byte* p, __m512 inv) noexcept {
    __m512i codes = _mm512_castsi128_si512(quantize16(p, inv));
    codes = _mm512_inserti32x4(codes, quantize16(p + 32, inv), 1);
    codes = _mm512_inserti32x4(codes, quantize16(p + 64, inv), 2);
    return _mm512_inserti32x4(codes, quantize16(p + 96, inv), 3);
}

// int8 t -> 4-bit q = t rounded to a multiple of 16 (ties away from zero) / 16, in the low nibble.
__m512i int4_nibbles(__m512i t) noexcept {
    const __m512i magnitude = _mm512_abs_epi8(t);  // -128 -> 0x80, read as unsigned 128
    const __m512i rounded = _mm512_and_si512(_mm512_add_epi8(magnitude, _mm512_set1_epi8(8)),
                                             _mm512_set1_epi8(static_cast<char>(0xF0)));
    const __m512i m = _mm512_and_si512(_mm512_srli_epi16(rounded, 4), _mm512_set1_epi8(0x0F));
    const __mmask64 negative = _mm512_movepi8_mask(t);
    const __m512i signed_m = _mm512_mask_sub_epi8(m, negative, _mm512_setzero_si512(), m);
    return _mm512_and_si512(signed_m, _mm512_set1_epi8(0x0F));
}

float amax(const std::byte* row, std::size_t k) noexcept {
    const __m512i magnitude = _mm512_set1_epi16(0x7FFF);
    __m512i m0 = _mm512_setzero_si512(), m1 = m0;
    for (std::size_t c = 0; c < k; c += 64) {  // k is a multiple of 64 for every packable matrix
        const __m512i a = _mm512_loadu_si512(row + 2 * c);
        const __m512i b = _mm512_loadu_si512(row + 2 * c + 64);
        m0 = _mm512_max_epu16(m0, _mm512_and_si512(a, magnitude));
        m1 = _mm512_max_epu16(m1, _mm512_and_si512(b, magnitude));
    }
    alignas(64) std::uint16_t lanes[32];
    _mm512_store_si512(lanes, _mm512_max_epu16(m0, m1));
    return max_lane_as_float(lanes, 32);
}

void quantize_int8(const std::byte* row, std::size_t k, float inv, std::int8_t* codes) noexcept {
    const __m512 vinv = _mm512_set1_ps(inv);
    for (std::size_t c = 0; c < k; c += 64)
        _mm512_storeu_si512(codes + c, quantize64(row + 2 * c, vinv));
}

void quantize_int4(const std::byte* row, std::size_t k, float inv, std::uint8_t* bytes) noexcept {
    const __m512 vinv = _mm512_set1_ps(inv);
    for (std::size_t tile = 0; tile < k / 128; ++tile) {
        const std::byte* p = row + 2 * tile * 128;
        const __m512i lo = int4_nibbles(quantize64(p, vinv));        // columns 0..63 of the tile
        const __m512i hi = int4_nibbles(quantize64(p + 128, vinv));  // columns 64..127
        const __m512i packed = _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));  // hi < 16: no carry
        _mm512_storeu_si512(bytes + tile * 64, packed);
    }
}

// Lines g = 4L + j (L = 0..3) of the panel from u[j], u[4 + j], u[8 + j], u[12 + j], whose
// 128-bit lane L holds word 4L + j of rows 0-3, 4-7, 8-11 and 12-15 respectively.
void gather_lines(__m512i a, __m512i b, __m512i c, __m512i d, __m512i out[4]) noexcept {
    const __m512i ab_low = _mm512_shuffle_i32x4(a, b, 0x44);   // a0 a1 b0 b1
    const __m512i ab_high = _mm512_shuffle_i32x4(a, b, 0xEE);  // a2 a3 b2 b3
    const __m512i cd_low = _mm512_shuffle_i32x4(c, d, 0x44);
    const __m512i cd_high = _mm512_shuffle_i32x4(c, d, 0xEE);
    out[0] = _mm512_shuffle_i32x4(ab_low, cd_low, 0x88);  // a0 b0 c0 d0
    out[1] = _mm512_shuffle_i32x4(ab_low, cd_low, 0xDD);  // a1 b1 c1 d1
    out[2] = _mm512_shuffle_i32x4(ab_high, cd_high, 0x88);
    out[3] = _mm512_shuffle_i32x4(ab_high, cd_high, 0xDD);
}

void transpose_panel(const std::uint8_t* rows, std::size_t row_stride, std::uint8_t* panel) noexcept {
    // A 16x16 transpose of 32-bit words: interleave words within 128-bit lanes (two rounds),
    // then move whole lanes.
    __m512i r[16], u[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(rows + i * row_stride);
    for (int q = 0; q < 4; ++q) {
        const __m512i* row = r + 4 * q;
        const __m512i t0 = _mm512_unpacklo_epi32(row[0], row[1]), t1 = _mm512_unpackhi_epi32(row[0], row[1]);
        const __m512i t2 = _mm512_unpacklo_epi32(row[2], row[3]), t3 = _mm512_unpackhi_epi32(row[2], row[3]);
        u[4 * q + 0] = _mm512_unpacklo_epi64(t0, t2);
        u[4 * q + 1] = _mm512_unpackhi_epi64(t0, t2);
        u[4 * q + 2] = _mm512_unpacklo_epi64(t1, t3);
        u[4 * q + 3] = _mm512_unpackhi_epi64(t1, t3);
    }
    // Streaming stores skip reading the destination lines first (they are fully overwritten);
    // they need 64-byte alignment, which panels in a Tensor have.
    const bool aligned = reinterpret_cast<std::uintptr_t>(panel) % 64 == 0;
    for (int j = 0; j < 4; ++j) {
        __m512i lines[4];
        gather_lines(u[j], u[4 + j], u[8 + j], u[12 + j], lines);
        for (int lane = 0; lane < 4; ++lane) {
            std::uint8_t* line = panel + (4 * lane + j) * 64;
            if (aligned)
                _mm512_stream_si512(reinterpret_cast<__m512i*>(line), lines[lane]);
            else
                _mm512_storeu_si512(line, lines[lane]);
        }
    }
}

void finish_panels() noexcept { _mm_sfence(); }

}  // namespace

const RowKernels avx512_row_kernels{&amax, &quantize_int8, &quantize_int4, &transpose_panel, &finish_panels};

}  // namespace moequant::amx
