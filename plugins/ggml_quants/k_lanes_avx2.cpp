// The K-quant search lanes for AVX2: 8 sub-blocks per instruction. Compiled
// with -mavx2 (CMakeLists.txt); everything here has internal linkage so no AVX2 copy of an
// inline function can replace the portable one elsewhere.
#include "k_lanes.hpp"

#include <type_traits>

#include <immintrin.h>

namespace moequant::ggml_quants::lanes_avx2 {
namespace {

constexpr int W = 8;
using F = __m256;
using I = __m256i;
using M = __m256;  // all-ones lanes where true

inline F load(const float* p) { return _mm256_load_ps(p); }
inline void store(float* p, F v) { _mm256_store_ps(p, v); }
inline F set1(float v) { return _mm256_set1_ps(v); }
inline I set1_i(int v) { return _mm256_set1_epi32(v); }
inline F add(F a, F b) { return _mm256_add_ps(a, b); }
inline F sub(F a, F b) { return _mm256_sub_ps(a, b); }
inline F mul(F a, F b) { return _mm256_mul_ps(a, b); }
inline F div(F a, F b) { return _mm256_div_ps(a, b); }
inline F sqrt_f(F a) { return _mm256_sqrt_ps(a); }
inline F abs_f(F a) { return _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }
inline F negate(F a) { return _mm256_xor_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN))); }
inline I as_int(F a) { return _mm256_castps_si256(a); }
inline I and_i(I a, I b) { return _mm256_and_si256(a, b); }
inline I sub_i(I a, I b) { return _mm256_sub_epi32(a, b); }
inline I add_i(I a, I b) { return _mm256_add_epi32(a, b); }
inline void store_i(int* p, I v) { _mm256_store_si256(reinterpret_cast<__m256i*>(p), v); }
inline I max_i(I a, I b) { return _mm256_max_epi32(a, b); }
inline I min_i(I a, I b) { return _mm256_min_epi32(a, b); }
inline F to_float(I a) { return _mm256_cvtepi32_ps(a); }
// Ordered, non-signalling comparisons: false for NaN, as C's < > <= == are.
inline M lt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
inline M gt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
inline M le(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LE_OQ); }
inline M eq(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
inline M ne(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_NEQ_UQ); }  // true for NaN, as !=
inline M and_m(M a, M b) { return _mm256_and_ps(a, b); }
inline M and_not(M a, M b) { return _mm256_andnot_ps(b, a); }
inline bool none(M m) { return _mm256_movemask_ps(m) == 0; }
// m ? a : b per lane.
inline F select(M m, F a, F b) { return _mm256_blendv_ps(b, a, m); }
inline I select_i(M m, I a, I b) { return _mm256_blendv_epi8(b, a, _mm256_castps_si256(m)); }

// ggml's nearest_int per lane: the low mantissa bits of x + 1.5 * 2^23.
inline I nearest_int_lanes(F x) {
    return sub_i(and_i(as_int(add(x, set1(12582912.f))), set1_i(0x007fffff)), set1_i(0x00400000));
}

inline M or_m(M a, M b) { return _mm256_or_ps(a, b); }
inline F min_f(F a, F b) { return _mm256_min_ps(a, b); }
inline F max_f(F a, F b) { return _mm256_max_ps(a, b); }
inline F round_even(F a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
// MAXPS / MINPS on the bits as signed integers: the same as the float ones where b is +0 or
// positive and a is not NaN (offset_lanes.inc), on the integer units.
inline F max_bits(F a, F b) { return _mm256_castsi256_ps(_mm256_max_epi32(_mm256_castps_si256(a), _mm256_castps_si256(b))); }
inline F min_bits(F a, F b) { return _mm256_castsi256_ps(_mm256_min_epi32(_mm256_castps_si256(a), _mm256_castps_si256(b))); }
// Every lane in m or in flat.
inline bool all_or_flat(M m, M flat) { return _mm256_movemask_ps(_mm256_or_ps(m, flat)) == 0xFF; }

// The transpositions of offset_levels_32, value by value.
inline void load_transposed(const float* x, float (*xt)[W]) {
    for (int i = 0; i < 32; ++i)
        for (int k = 0; k < W; ++k) xt[i][k] = x[32 * k + i];
}
inline void store_levels(const float (*lt)[W], std::uint8_t* levels) {
    for (int k = 0; k < W; ++k)
        for (int i = 0; i < 32; ++i) levels[32 * k + i] = static_cast<std::uint8_t>(static_cast<int>(lt[i][k]));
}

// The transpositions of symmetric_levels_16, value by value.
inline void load_transposed_16(const float* x, float (*xt)[W]) {
    for (int i = 0; i < 16; ++i)
        for (int k = 0; k < W; ++k) xt[i][k] = x[16 * k + i];
}
inline void store_levels_16(const int (*lt)[W], std::int8_t* levels) {
    for (int k = 0; k < W; ++k)
        for (int i = 0; i < 16; ++i) levels[16 * k + i] = static_cast<std::int8_t>(lt[i][k]);
}

// For q8_lanes.inc.
inline F loadu(const float* p) { return _mm256_loadu_ps(p); }
inline M ge(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
inline F trunc_f(F a) { return _mm256_round_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC); }
inline F and_f(F a, F b) { return _mm256_and_ps(a, b); }
inline F or_f(F a, F b) { return _mm256_or_ps(a, b); }
inline I cvtt_i(F a) { return _mm256_cvttps_epi32(a); }
// The low byte of each of the 8 lanes into 8 bytes.
inline void store_low_bytes(std::uint8_t* p, I v) {
    const I low = _mm256_shuffle_epi8(v, _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,  //
                                                          0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
    const __m128i packed = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(low, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0)));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), packed);
}
// Lanes are non-negative and not NaN: the order of the maxima does not matter.
inline float hmax(F a) {
    __m128 q = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    q = _mm_max_ps(q, _mm_movehl_ps(q, q));
    q = _mm_max_ss(q, _mm_shuffle_ps(q, q, 1));
    return _mm_cvtss_f32(q);
}

}  // namespace

#include "offset_lanes.inc"
#include "symmetric_lanes.inc"
#include "q8_lanes.inc"
#include "requantize_lanes.inc"

}  // namespace moequant::ggml_quants::lanes_avx2
