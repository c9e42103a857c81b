// The K-quant search lanes for AVX2: 8 sub-blocks per instruction. Compiled
// with -mavx2 (CMakeLists.txt); everything here has internal linkage so no AVX2 copy of an
// inline function can replace the portable one elsewhere.
#include "k_lanes.hpp"

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

}  // namespace

#include "offset_lanes.inc"
#include "symmetric_lanes.inc"

}  // namespace moequant::ggml_quants::lanes_avx2
