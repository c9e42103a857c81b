// The K-quant search lanes for AVX-512: 16 sub-blocks per instruction. Compiled with
// -mavx512f only (CMakeLists.txt); everything here has internal linkage so no AVX-512 copy of
// an inline function can replace the portable one elsewhere (nor may it call quant_search.hpp's
// inline nearest_int).
#include "k_lanes.hpp"

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

inline F load(const float* p) { return _mm512_load_ps(p); }
inline void store(float* p, F v) { _mm512_store_ps(p, v); }
inline F set1(float v) { return _mm512_set1_ps(v); }
inline I set1_i(int v) { return _mm512_set1_epi32(v); }
inline F add(F a, F b) { return _mm512_add_ps(a, b); }
inline F sub(F a, F b) { return _mm512_sub_ps(a, b); }
inline F mul(F a, F b) { return _mm512_mul_ps(a, b); }
inline F div(F a, F b) { return _mm512_div_ps(a, b); }
inline F sqrt_f(F a) { return _mm512_sqrt_ps(a); }
inline F abs_f(F a) { return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff))); }
inline F negate(F a) { return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN))); }
inline I as_int(F a) { return _mm512_castps_si512(a); }
inline I and_i(I a, I b) { return _mm512_and_si512(a, b); }
inline I sub_i(I a, I b) { return _mm512_sub_epi32(a, b); }
inline I add_i(I a, I b) { return _mm512_add_epi32(a, b); }
inline void store_i(int* p, I v) { _mm512_store_si512(p, v); }
inline I max_i(I a, I b) { return _mm512_max_epi32(a, b); }
inline I min_i(I a, I b) { return _mm512_min_epi32(a, b); }
inline F to_float(I a) { return _mm512_cvtepi32_ps(a); }
// Ordered, non-signalling comparisons: false for NaN, as C's < > <= == are.
inline M lt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
inline M gt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
inline M le(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
inline M eq(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
inline M ne(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_NEQ_UQ); }  // true for NaN, as !=
inline M and_m(M a, M b) { return static_cast<M>(a & b); }
inline M and_not(M a, M b) { return static_cast<M>(a & ~b); }
inline bool none(M m) { return m == 0; }
// m ? a : b per lane.
inline F select(M m, F a, F b) { return _mm512_mask_blend_ps(m, b, a); }
inline I select_i(M m, I a, I b) { return _mm512_mask_blend_epi32(m, b, a); }

// ggml's nearest_int per lane: the low mantissa bits of x + 1.5 * 2^23.
inline I nearest_int_lanes(F x) {
    return sub_i(and_i(as_int(add(x, set1(12582912.f))), set1_i(0x007fffff)), set1_i(0x00400000));
}

}  // namespace

#include "offset_lanes.inc"
#include "symmetric_lanes.inc"

}  // namespace moequant::ggml_quants::MOEQUANT_K_LANES_AVX512
