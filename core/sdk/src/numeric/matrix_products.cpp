#include <moequant/matrix_products.hpp>

#include "numeric/onednn_products.hpp"

namespace moequant {

void f32_gemm(bool a_transposed, bool b_transposed, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
              std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
    detail::f32_gemm(a_transposed, b_transposed, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void bf16_gemm(bool a_transposed, bool b_transposed, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
               const std::uint16_t* a, std::int64_t lda, const std::uint16_t* b, std::int64_t ldb, float beta, float* c,
               std::int64_t ldc) {
    detail::bf16_gemm(a_transposed, b_transposed, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

std::string f32_gemm_kernels() {
    static const std::string kernels = detail::f32_gemm_kernels();
    return kernels;
}

}  // namespace moequant
