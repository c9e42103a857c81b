// exp over float32 values with glibc expf's bits, AVX-512 F/DQ (16 lanes, computed as two
// halves of 8 doubles). Compiled with the AVX-512 flags.
#include "kernels/expf_constants.hpp"
#include "kernels/kernels.hpp"
#include "kernels/lanes_avx512.hpp"  // <immintrin.h> without GCC 12's false warnings

#include <cmath>

namespace moequant::kernels::MOEQUANT_AVX512_KERNELS {
namespace {

namespace c = expf_constants;

struct Table {
    __m512i t0, t1, t2, t3;  // its 32 entries, 8 per register
};

// 8 values (as doubles) -> 8 floats, glibc's steps (expf_constants.hpp).
__m256 exp_8(__m512d x, const Table& table) {
    const __m512d inv = _mm512_set1_pd(c::inv_ln2_n), shift = _mm512_set1_pd(c::shift);
    __m512d kd = _mm512_fmadd_pd(inv, x, shift);
    const __m512i ki = _mm512_castpd_si512(kd);
    kd = _mm512_sub_pd(kd, shift);
    const __m512d r = _mm512_fmsub_pd(inv, x, kd);
    const __m512i index = _mm512_and_si512(ki, _mm512_set1_epi64(31));
    const __m512i low = _mm512_permutex2var_epi64(table.t0, index, table.t1);
    const __m512i high = _mm512_permutex2var_epi64(table.t2, index, table.t3);
    const __mmask8 upper = _mm512_test_epi64_mask(index, _mm512_set1_epi64(16));
    const __m512i t = _mm512_add_epi64(_mm512_mask_blend_epi64(upper, low, high), _mm512_slli_epi64(ki, 47));
    const __m512d z = _mm512_fmadd_pd(r, _mm512_set1_pd(c::c0), _mm512_set1_pd(c::c1));
    __m512d y = _mm512_fmadd_pd(r, _mm512_set1_pd(c::c2), _mm512_set1_pd(1.0));
    y = _mm512_fmadd_pd(z, _mm512_mul_pd(r, r), y);
    return _mm512_cvtpd_ps(_mm512_mul_pd(y, _mm512_castsi512_pd(t)));
}

}  // namespace

void exp_f32(const float* src, float* dst, std::size_t n) noexcept {
    const Table table{_mm512_load_si512(c::table), _mm512_load_si512(c::table + 8), _mm512_load_si512(c::table + 16),
                      _mm512_load_si512(c::table + 24)};
    for (std::size_t i = 0; i < n; i += 16) {
        const std::size_t count = n - i < 16 ? n - i : 16;
        const auto lanes = static_cast<__mmask16>((1u << count) - 1u);
        const __m512 x = _mm512_maskz_loadu_ps(lanes, src + i);
        const __m512i top = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(x), 20), _mm512_set1_epi32(0x7ff));
        const __mmask16 special = _mm512_mask_cmpge_epu32_mask(lanes, top, _mm512_set1_epi32(c::special_top));
        const __m256 low = exp_8(_mm512_cvtps_pd(_mm512_castps512_ps256(x)), table);
        const __m256 high = exp_8(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1))), table);
        _mm512_mask_storeu_ps(dst + i, lanes, _mm512_insertf32x8(_mm512_castps256_ps512(low), high, 1));
        if (special) {  // from the loaded values: dst may be src, already overwritten
            alignas(64) float values[16];
            _mm512_store_ps(values, x);
            for (std::size_t l = 0; l < count; ++l)
                if ((special >> l) & 1u) dst[i + l] = std::exp(values[l]);
        }
    }
}

}  // namespace moequant::kernels::MOEQUANT_AVX512_KERNELS
