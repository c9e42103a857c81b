// Force-included (-include) into a second compilation of moequant's AVX-512 kernel files so that
// tests can run them on CPUs without AVX-512: SIMDe (Debian's libsimde-dev) implements the
// _mm512_* intrinsics with narrower vectors, bit for bit. The few intrinsics SIMDe 0.7.4 lacks
// are built below from two 256-bit halves, which SIMDe does have.
#pragma once

// The compiler's own intrinsics header first: the alias macros below must not rewrite it.
#include <immintrin.h>

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

#include <simde/x86/f16c.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace moequant_avx512_emulation {

// Applies a 256-bit operation to both halves of a 512-bit vector (as integers).
template <class Op> simde__m512i on_halves(simde__m512i a, Op op) {
    return simde_mm512_inserti64x4(simde_mm512_castsi256_si512(op(simde_mm512_extracti64x4_epi64(a, 0))),
                                   op(simde_mm512_extracti64x4_epi64(a, 1)), 1);
}

inline simde__m512i cvtepu16_epi32(simde__m256i a) {
    return simde_mm512_inserti64x4(simde_mm512_castsi256_si512(simde_mm256_cvtepu16_epi32(simde_mm256_extracti128_si256(a, 0))),
                                   simde_mm256_cvtepu16_epi32(simde_mm256_extracti128_si256(a, 1)), 1);
}

inline simde__m256i cvtepi32_epi16(simde__m512i a) {
    // Truncation: keep the low 16 bits of each lane (vpmovdw).
    const simde__m512i low = simde_mm512_and_si512(a, simde_mm512_set1_epi32(0xFFFF));
    const simde__m256i lo = simde_mm512_extracti64x4_epi64(low, 0), hi = simde_mm512_extracti64x4_epi64(low, 1);
    return simde_mm256_permute4x64_epi64(simde_mm256_packus_epi32(lo, hi), 0xD8);
}

// vcvtps2dq: round to nearest even; NaN and values out of int32 range give INT32_MIN. Written
// per lane because SIMDe's portable version converts out-of-range floats in C++ (undefined).
inline simde__m512i cvtps_epi32(simde__m512 a) {
    float in[16];
    std::int32_t out[16];
    std::memcpy(in, &a, sizeof in);
    for (int i = 0; i < 16; ++i)
        out[i] = std::fabs(in[i]) < 2147483648.0f ? static_cast<std::int32_t>(std::nearbyint(in[i])) : INT32_MIN;
    simde__m512i r;
    std::memcpy(&r, out, sizeof r);
    return r;
}

// vcvttps2dq: toward zero; NaN and values out of int32 range give INT32_MIN (per lane, as above).
inline simde__m512i cvttps_epi32(simde__m512 a) {
    float in[16];
    std::int32_t out[16];
    std::memcpy(in, &a, sizeof in);
    for (int i = 0; i < 16; ++i)
        out[i] = in[i] >= -2147483648.0f && in[i] < 2147483648.0f ? static_cast<std::int32_t>(in[i]) : INT32_MIN;
    simde__m512i r;
    std::memcpy(&r, out, sizeof r);
    return r;
}

// vrndscaleps with imm8 = (M << 4) | rounding (0 nearest even, 1 down, 2 up, 3 toward zero;
// bit 2, the MXCSR mode, unused): SIMDe 0.7.4 scales by the rounding bits too, so per lane.
inline simde__m512 roundscale_ps(simde__m512 a, int imm8) {
    float v[16];
    std::memcpy(v, &a, sizeof v);
    const float scale = std::ldexp(1.0f, (imm8 >> 4) & 15);
    for (float& x : v) {
        if (!std::isfinite(x)) continue;
        const float s = x * scale;
        float r;
        switch (imm8 & 3) {
        case 0: r = std::nearbyint(s); break;
        case 1: r = std::floor(s); break;
        case 2: r = std::ceil(s); break;
        default: r = std::trunc(s); break;
        }
        x = r / scale;
    }
    simde__m512 r;
    std::memcpy(&r, v, sizeof r);
    return r;
}

// vpmovdb: the low byte of each lane.
inline simde__m128i cvtepi32_epi8(simde__m512i a) {
    std::uint32_t in[16];
    std::uint8_t out[16];
    std::memcpy(in, &a, sizeof in);
    for (int i = 0; i < 16; ++i) out[i] = static_cast<std::uint8_t>(in[i] & 0xff);
    simde__m128i r;
    std::memcpy(&r, out, sizeof r);
    return r;
}

inline simde__m512i cvtepu8_epi32(simde__m128i a) {
    return simde_mm512_inserti64x4(simde_mm512_castsi256_si512(simde_mm256_cvtepu8_epi32(a)),
                                   simde_mm256_cvtepu8_epi32(simde_mm_srli_si128(a, 8)), 1);
}

inline simde__m512 cvtepi32_ps(simde__m512i a) {
    return simde_mm512_castsi512_ps(on_halves(a, [](simde__m256i h) {
        return simde_mm256_castps_si256(simde_mm256_cvtepi32_ps(h));
    }));
}

inline simde__m512 cvtph_ps(simde__m256i a) {
    const simde__m256 lo = simde_mm256_cvtph_ps(simde_mm256_extracti128_si256(a, 0));
    const simde__m256 hi = simde_mm256_cvtph_ps(simde_mm256_extracti128_si256(a, 1));
    return simde_mm512_insertf32x8(simde_mm512_castps256_ps512(lo), hi, 1);
}

inline simde__m256i cvtps_ph_nearest(simde__m512 a) {
    const simde__m512i bits = simde_mm512_castps_si512(a);
    const simde__m128i lo = simde_mm256_cvtps_ph(simde_mm256_castsi256_ps(simde_mm512_extracti64x4_epi64(bits, 0)), 0);
    const simde__m128i hi = simde_mm256_cvtps_ph(simde_mm256_castsi256_ps(simde_mm512_extracti64x4_epi64(bits, 1)), 0);
    return simde_mm256_inserti128_si256(simde_mm256_castsi128_si256(lo), hi, 1);
}

// Masked loads and stores touch only the selected lanes, like the hardware (which never faults
// on masked-off lanes): lanes are copied one at a time.
template <class Vector, std::size_t lane_bytes> Vector masked_load(std::uint64_t lanes, const void* p) {
    Vector v;
    std::memset(&v, 0, sizeof v);
    for (std::size_t i = 0; i < sizeof v / lane_bytes; ++i)
        if (lanes >> i & 1)
            std::memcpy(reinterpret_cast<char*>(&v) + i * lane_bytes, static_cast<const char*>(p) + i * lane_bytes, lane_bytes);
    return v;
}

template <std::size_t lane_bytes, class Vector> void masked_store(void* p, std::uint64_t lanes, Vector v) {
    for (std::size_t i = 0; i < sizeof v / lane_bytes; ++i)
        if (lanes >> i & 1)
            std::memcpy(static_cast<char*>(p) + i * lane_bytes, reinterpret_cast<const char*>(&v) + i * lane_bytes, lane_bytes);
}

inline void stream_si512(void* p, simde__m512i a) { simde_mm512_storeu_si512(p, a); }

}  // namespace moequant_avx512_emulation

// #undef first: some compilers define these as macros themselves.
#undef _mm512_cvtepu16_epi32
#define _mm512_cvtepu16_epi32(a) moequant_avx512_emulation::cvtepu16_epi32(a)
#undef _mm512_cvtepi32_epi16
#define _mm512_cvtepi32_epi16(a) moequant_avx512_emulation::cvtepi32_epi16(a)
#undef _mm512_cvtps_epi32
#define _mm512_cvtps_epi32(a) moequant_avx512_emulation::cvtps_epi32(a)
#undef _mm512_cvttps_epi32
#define _mm512_cvttps_epi32(a) moequant_avx512_emulation::cvttps_epi32(a)
#undef _mm512_cvtepi32_epi8
#define _mm512_cvtepi32_epi8(a) moequant_avx512_emulation::cvtepi32_epi8(a)
#undef _mm512_cvtepu8_epi32
#define _mm512_cvtepu8_epi32(a) moequant_avx512_emulation::cvtepu8_epi32(a)
#undef _mm512_cvtepi32_ps
#define _mm512_cvtepi32_ps(a) moequant_avx512_emulation::cvtepi32_ps(a)
#undef _mm512_cvtph_ps
#define _mm512_cvtph_ps(a) moequant_avx512_emulation::cvtph_ps(a)
// The kernels only convert with round-to-nearest-even.
#undef _mm512_cvtps_ph
#define _mm512_cvtps_ph(a, rounding) moequant_avx512_emulation::cvtps_ph_nearest(a)
#undef _mm_maskz_loadu_epi8
#define _mm_maskz_loadu_epi8(m, p) moequant_avx512_emulation::masked_load<simde__m128i, 1>(m, p)
#undef _mm256_maskz_loadu_epi16
#define _mm256_maskz_loadu_epi16(m, p) moequant_avx512_emulation::masked_load<simde__m256i, 2>(m, p)
#undef _mm512_maskz_loadu_ps
#define _mm512_maskz_loadu_ps(m, p) moequant_avx512_emulation::masked_load<simde__m512, 4>(m, p)
#undef _mm256_mask_storeu_epi16
#define _mm256_mask_storeu_epi16(p, m, v) moequant_avx512_emulation::masked_store<2>(p, m, v)
#undef _mm512_mask_storeu_epi32
#define _mm512_mask_storeu_epi32(p, m, v) moequant_avx512_emulation::masked_store<4>(p, m, v)
#undef _mm512_roundscale_ps
#define _mm512_roundscale_ps(a, imm8) moequant_avx512_emulation::roundscale_ps(a, imm8)
// SIMDe 0.7.4 has it under its own name only.
#undef _mm512_shuffle_f32x4
#define _mm512_shuffle_f32x4(a, b, imm8) simde_mm512_shuffle_f32x4(a, b, imm8)
#undef _mm512_stream_si512
#define _mm512_stream_si512(p, a) moequant_avx512_emulation::stream_si512(p, a)
