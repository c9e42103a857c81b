// exp over float32 values with glibc expf's bits, AVX2 + FMA (8 lanes, computed as two halves
// of 4 doubles). Compiled with the AVX2 flags.
#include "kernels/expf_constants.hpp"
#include "kernels/kernels.hpp"

#include <immintrin.h>

#include <cmath>

namespace moequant::kernels::avx2 {
namespace {

namespace c = expf_constants;

// 4 values (as doubles) -> 4 floats, glibc's steps (expf_constants.hpp).
__m128 exp_4(__m256d x) {
    const __m256d inv = _mm256_set1_pd(c::inv_ln2_n), shift = _mm256_set1_pd(c::shift);
    __m256d kd = _mm256_fmadd_pd(inv, x, shift);
    const __m256i ki = _mm256_castpd_si256(kd);
    kd = _mm256_sub_pd(kd, shift);
    const __m256d r = _mm256_fmsub_pd(inv, x, kd);
    const __m256i index = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
    const __m256i entry = _mm256_i64gather_epi64(reinterpret_cast<const long long*>(c::table), index, 8);
    const __m256i t = _mm256_add_epi64(entry, _mm256_slli_epi64(ki, 47));
    const __m256d z = _mm256_fmadd_pd(r, _mm256_set1_pd(c::c0), _mm256_set1_pd(c::c1));
    __m256d y = _mm256_fmadd_pd(r, _mm256_set1_pd(c::c2), _mm256_set1_pd(1.0));
    y = _mm256_fmadd_pd(z, _mm256_mul_pd(r, r), y);
    return _mm256_cvtpd_ps(_mm256_mul_pd(y, _mm256_castsi256_pd(t)));
}

}  // namespace

void exp_f32(const float* src, float* dst, std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(src + i);
        const __m256i top = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(x), 20), _mm256_set1_epi32(0x7ff));
        // top is below 2^11, so a signed compare is an unsigned one.
        const int special = _mm256_movemask_ps(
            _mm256_castsi256_ps(_mm256_cmpgt_epi32(top, _mm256_set1_epi32(static_cast<int>(c::special_top) - 1))));
        const __m128 low = exp_4(_mm256_cvtps_pd(_mm256_castps256_ps128(x)));
        const __m128 high = exp_4(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
        _mm256_storeu_ps(dst + i, _mm256_insertf128_ps(_mm256_castps128_ps256(low), high, 1));
        if (special) {  // from the loaded values: dst may be src, already overwritten
            alignas(32) float values[8];
            _mm256_store_ps(values, x);
            for (std::size_t l = 0; l < 8; ++l)
                if ((special >> l) & 1) dst[i + l] = std::exp(values[l]);
        }
    }
    for (; i < n; ++i) dst[i] = std::exp(src[i]);  // the tail: glibc's own
}

}  // namespace moequant::kernels::avx2
