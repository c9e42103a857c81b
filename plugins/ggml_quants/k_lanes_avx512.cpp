// The K-quant search lanes for AVX-512: 16 sub-blocks per instruction, 32 per pair of
// instructions in the searches. Compiled with
// -mavx512f only (CMakeLists.txt); everything here has internal linkage so no AVX-512 copy of
// an inline function can replace the portable one elsewhere (nor may it call quant_search.hpp's
// inline nearest_int).
#include "k_lanes.hpp"

#include <type_traits>

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

// tests/emulation compiles this file a second time over SIMDe under another namespace name.
#ifndef MOEQUANT_K_LANES_AVX512
#define MOEQUANT_K_LANES_AVX512 lanes_avx512
#endif

namespace moequant::ggml_quants::MOEQUANT_K_LANES_AVX512 {
namespace {

constexpr int W = 16;
using F = __m512;
using I = __m512i;
using M = __mmask16;

inline F set1(float v) { return _mm512_set1_ps(v); }
inline I set1_i(int v) { return _mm512_set1_epi32(v); }
inline F add(F a, F b) { return _mm512_add_ps(a, b); }
inline F sub(F a, F b) { return _mm512_sub_ps(a, b); }
inline F mul(F a, F b) { return _mm512_mul_ps(a, b); }
inline F div(F a, F b) { return _mm512_div_ps(a, b); }
inline F abs_f(F a) { return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff))); }
inline F negate(F a) { return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN))); }
inline I as_int(F a) { return _mm512_castps_si512(a); }
inline I and_i(I a, I b) { return _mm512_and_si512(a, b); }
inline I sub_i(I a, I b) { return _mm512_sub_epi32(a, b); }
inline I add_i(I a, I b) { return _mm512_add_epi32(a, b); }
inline I max_i(I a, I b) { return _mm512_max_epi32(a, b); }
inline I min_i(I a, I b) { return _mm512_min_epi32(a, b); }
// m ? a : b per lane.
inline F select(M m, F a, F b) { return _mm512_mask_blend_ps(m, b, a); }

// ggml's nearest_int per lane: the low mantissa bits of x + 1.5 * 2^23.
inline I nearest_int_lanes(F x) {
    return sub_i(and_i(as_int(add(x, set1(12582912.f))), set1_i(0x007fffff)), set1_i(0x00400000));
}

// r[k][i] -> r[i][k] for a 16 x 16 block of floats.
inline void transpose16(__m512* r) {
    __m512 t[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // Each 128-bit lane L of r[4g + j] then holds rows 4g..4g+3 of column 4L + j.
    for (int g = 0; g < 4; ++g) {
        r[4 * g] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        r[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
        r[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        r[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    for (int j = 0; j < 4; ++j) {
        const __m512 ab_even = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88), ab_odd = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xDD);
        const __m512 cd_even = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88), cd_odd = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xDD);
        t[j] = _mm512_shuffle_f32x4(ab_even, cd_even, 0x88);
        t[4 + j] = _mm512_shuffle_f32x4(ab_odd, cd_odd, 0x88);
        t[8 + j] = _mm512_shuffle_f32x4(ab_even, cd_even, 0xDD);
        t[12 + j] = _mm512_shuffle_f32x4(ab_odd, cd_odd, 0xDD);
    }
    for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// For q8_lanes.inc.
inline F loadu(const float* p) { return _mm512_loadu_ps(p); }
inline F max_f(F a, F b) { return _mm512_max_ps(a, b); }
inline M ge(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
inline F trunc_f(F a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC); }
inline F and_f(F a, F b) { return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_castps_si512(b))); }
inline F or_f(F a, F b) { return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), _mm512_castps_si512(b))); }
inline I cvtt_i(F a) { return _mm512_cvttps_epi32(a); }
inline void store_low_bytes(std::uint8_t* p, I v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v)); }
// Lanes are non-negative and not NaN: the order of the maxima does not matter.
inline float hmax(F a) {
    const __m256 half = _mm256_max_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    __m128 q = _mm_max_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1));
    q = _mm_max_ps(q, _mm_movehl_ps(q, q));
    q = _mm_max_ss(q, _mm_shuffle_ps(q, q, 1));
    return _mm_cvtss_f32(q);
}

}  // namespace

#include "q8_lanes.inc"
#include "requantize_lanes.inc"

// The searches run two vectors of 16 lanes side by side (W = 32): each lane's operations are
// the same, and the second vector's independent instructions fill the gaps in the first's
// dependency chains (its sums are sequential by design), about 15% faster on Zen 4 for the
// offset search and 8% for the symmetric one.
namespace pairs {
namespace {

constexpr int W = 32;
struct F {
    __m512 lo, hi;
};
struct I {
    __m512i lo, hi;
};
using M = std::uint32_t;  // lane k of lo: bit k; of hi: bit 16 + k

inline M join(__mmask16 lo, __mmask16 hi) { return static_cast<M>(lo) | (static_cast<M>(hi) << 16); }
inline __mmask16 low_mask(M m) { return static_cast<__mmask16>(m & 0xFFFF); }
inline __mmask16 high_mask(M m) { return static_cast<__mmask16>(m >> 16); }

inline F load(const float* p) { return {_mm512_load_ps(p), _mm512_load_ps(p + 16)}; }
inline void store(float* p, F v) {
    _mm512_store_ps(p, v.lo);
    _mm512_store_ps(p + 16, v.hi);
}
inline F set1(float v) { return {_mm512_set1_ps(v), _mm512_set1_ps(v)}; }
inline I set1_i(int v) { return {_mm512_set1_epi32(v), _mm512_set1_epi32(v)}; }
inline F add(F a, F b) { return {_mm512_add_ps(a.lo, b.lo), _mm512_add_ps(a.hi, b.hi)}; }
inline F sub(F a, F b) { return {_mm512_sub_ps(a.lo, b.lo), _mm512_sub_ps(a.hi, b.hi)}; }
inline F mul(F a, F b) { return {_mm512_mul_ps(a.lo, b.lo), _mm512_mul_ps(a.hi, b.hi)}; }
inline F div(F a, F b) { return {_mm512_div_ps(a.lo, b.lo), _mm512_div_ps(a.hi, b.hi)}; }
inline F sqrt_f(F a) { return {_mm512_sqrt_ps(a.lo), _mm512_sqrt_ps(a.hi)}; }
inline F min_f(F a, F b) { return {_mm512_min_ps(a.lo, b.lo), _mm512_min_ps(a.hi, b.hi)}; }
inline F max_f(F a, F b) { return {_mm512_max_ps(a.lo, b.lo), _mm512_max_ps(a.hi, b.hi)}; }
inline __m512 min_bits(__m512 a, __m512 b) { return _mm512_castsi512_ps(_mm512_min_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b))); }
inline __m512 max_bits(__m512 a, __m512 b) { return _mm512_castsi512_ps(_mm512_max_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b))); }
// offset_lanes.inc's integer MAXPS / MINPS.
inline F min_bits(F a, F b) { return {min_bits(a.lo, b.lo), min_bits(a.hi, b.hi)}; }
inline F max_bits(F a, F b) { return {max_bits(a.lo, b.lo), max_bits(a.hi, b.hi)}; }
inline F round_even(F a) {
    return {_mm512_roundscale_ps(a.lo, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
            _mm512_roundscale_ps(a.hi, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
}
inline F abs_f(F a) { return {MOEQUANT_K_LANES_AVX512::abs_f(a.lo), MOEQUANT_K_LANES_AVX512::abs_f(a.hi)}; }
inline F negate(F a) { return {MOEQUANT_K_LANES_AVX512::negate(a.lo), MOEQUANT_K_LANES_AVX512::negate(a.hi)}; }
inline I max_i(I a, I b) { return {_mm512_max_epi32(a.lo, b.lo), _mm512_max_epi32(a.hi, b.hi)}; }
inline I min_i(I a, I b) { return {_mm512_min_epi32(a.lo, b.lo), _mm512_min_epi32(a.hi, b.hi)}; }
inline F to_float(I a) { return {_mm512_cvtepi32_ps(a.lo), _mm512_cvtepi32_ps(a.hi)}; }
inline M lt(F a, F b) { return join(_mm512_cmp_ps_mask(a.lo, b.lo, _CMP_LT_OQ), _mm512_cmp_ps_mask(a.hi, b.hi, _CMP_LT_OQ)); }
inline M gt(F a, F b) { return join(_mm512_cmp_ps_mask(a.lo, b.lo, _CMP_GT_OQ), _mm512_cmp_ps_mask(a.hi, b.hi, _CMP_GT_OQ)); }
inline M le(F a, F b) { return join(_mm512_cmp_ps_mask(a.lo, b.lo, _CMP_LE_OQ), _mm512_cmp_ps_mask(a.hi, b.hi, _CMP_LE_OQ)); }
inline M eq(F a, F b) { return join(_mm512_cmp_ps_mask(a.lo, b.lo, _CMP_EQ_OQ), _mm512_cmp_ps_mask(a.hi, b.hi, _CMP_EQ_OQ)); }
inline M ne(F a, F b) { return join(_mm512_cmp_ps_mask(a.lo, b.lo, _CMP_NEQ_UQ), _mm512_cmp_ps_mask(a.hi, b.hi, _CMP_NEQ_UQ)); }
inline M and_m(M a, M b) { return a & b; }
inline M and_not(M a, M b) { return a & ~b; }
inline M or_m(M a, M b) { return a | b; }
inline bool none(M m) { return m == 0; }
inline bool all_or_flat(M m, M flat) { return (m | flat) == 0xFFFFFFFFu; }
inline F select(M m, F a, F b) {
    return {_mm512_mask_blend_ps(low_mask(m), b.lo, a.lo), _mm512_mask_blend_ps(high_mask(m), b.hi, a.hi)};
}
inline I nearest_int_lanes(F x) {
    return {MOEQUANT_K_LANES_AVX512::nearest_int_lanes(x.lo), MOEQUANT_K_LANES_AVX512::nearest_int_lanes(x.hi)};
}
inline I sub_i(I a, I b) { return {_mm512_sub_epi32(a.lo, b.lo), _mm512_sub_epi32(a.hi, b.hi)}; }
inline I add_i(I a, I b) { return {_mm512_add_epi32(a.lo, b.lo), _mm512_add_epi32(a.hi, b.hi)}; }
inline void store_i(int* p, I v) {
    _mm512_store_si512(p, v.lo);
    _mm512_store_si512(p + 16, v.hi);
}
inline I select_i(M m, I a, I b) {
    return {_mm512_mask_blend_epi32(low_mask(m), b.lo, a.lo), _mm512_mask_blend_epi32(high_mask(m), b.hi, a.hi)};
}

// 32 sub-blocks of 16 values (x[16 k + i]) into xt[i][k], as two 16 x 16 blocks; the levels
// lt[i][k] back into bytes levels[16 k + i].
inline void load_transposed_16(const float* x, float (*xt)[W]) {
    for (int kh = 0; kh < 2; ++kh) {
        __m512 r[16];
        for (int k = 0; k < 16; ++k) r[k] = _mm512_loadu_ps(x + 16 * (16 * kh + k));
        transpose16(r);
        for (int i = 0; i < 16; ++i) _mm512_store_ps(&xt[i][16 * kh], r[i]);
    }
}
inline void store_levels_16(const int (*lt)[W], std::int8_t* levels) {
    for (int kh = 0; kh < 2; ++kh) {
        __m512 r[16];
        for (int i = 0; i < 16; ++i) r[i] = _mm512_castsi512_ps(_mm512_load_si512(&lt[i][16 * kh]));
        transpose16(r);
        for (int k = 0; k < 16; ++k)
            _mm_storeu_si128(reinterpret_cast<__m128i*>(levels + 16 * (16 * kh + k)), _mm512_cvtepi32_epi8(_mm512_castps_si512(r[k])));
    }
}

// 32 sub-blocks of 32 values (x[32 k + i]) into xt[i][k], as four 16 x 16 blocks.
inline void load_transposed(const float* x, float (*xt)[W]) {
    for (int kh = 0; kh < 2; ++kh)
        for (int ih = 0; ih < 2; ++ih) {
            __m512 r[16];
            for (int k = 0; k < 16; ++k) r[k] = _mm512_loadu_ps(x + 32 * (16 * kh + k) + 16 * ih);
            transpose16(r);
            for (int i = 0; i < 16; ++i) _mm512_store_ps(&xt[16 * ih + i][16 * kh], r[i]);
        }
}

// The levels (whole numbers 0..nmax as floats) lt[i][k] into bytes levels[32 k + i].
inline void store_levels(const float (*lt)[W], std::uint8_t* levels) {
    for (int kh = 0; kh < 2; ++kh)
        for (int ih = 0; ih < 2; ++ih) {
            __m512 r[16];
            for (int i = 0; i < 16; ++i) r[i] = _mm512_load_ps(&lt[16 * ih + i][16 * kh]);
            transpose16(r);
            for (int k = 0; k < 16; ++k)
                _mm_storeu_si128(reinterpret_cast<__m128i*>(levels + 32 * (16 * kh + k) + 16 * ih),
                                 _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(r[k])));
        }
}

}  // namespace

#include "offset_lanes.inc"
#include "symmetric_lanes.inc"

}  // namespace pairs

void symmetric_levels_16(int count, int nmax, const float* x, const float* weights, std::int8_t* levels, float* scales) {
    pairs::symmetric_levels_16(count, nmax, x, weights, levels, scales);
}

void offset_levels_32(int count, int nmax, const float* x, const float* weights, bool flat_when_below, OffsetSearch search,
                      std::uint8_t* levels, float* scales, float* negated_mins) {
    pairs::offset_levels_32(count, nmax, x, weights, flat_when_below, search, levels, scales, negated_mins);
}

}  // namespace moequant::ggml_quants::MOEQUANT_K_LANES_AVX512
