// oneDNN behind the SDK's products (matrix_products.hpp, compute_dtype.hpp's bf16_product): each
// call runs on the calling thread alone (its OpenMP team is capped at one), so a caller that
// splits a product into fixed blocks gets bytes independent of the thread count.
#pragma once

#include <cstdint>
#include <string>

namespace moequant::detail {

// c[m, n] = alpha * op(a) op(b) + beta * c, row-major with row strides lda, ldb, ldc (bf16_gemm).
void bf16_gemm(bool a_transposed, bool b_transposed, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
               const std::uint16_t* a, std::int64_t lda, const std::uint16_t* b, std::int64_t ldb, float beta, float* c,
               std::int64_t ldc);

// c[m, n] (dense, overwritten) = a[m, k] x op(b), all dense row-major: op(b) = b^T for b[n, k]
// (b_transposed: a linear layer's weight, attention's keys) or b for b[k, n] (attention's values).
void bf16_product(const std::uint16_t* a, const std::uint16_t* b, bool b_transposed, float* c, std::int64_t m, std::int64_t n,
                  std::int64_t k);

// oneDNN's name of the implementation it picks for such a product (e.g. "brg:avx512_core_bf16"),
// or "" when it has none (oneDNN 2.x multiplies BF16 only with AVX-512).
std::string bf16_product_implementation(std::int64_t m, std::int64_t n, std::int64_t k, bool b_transposed);

// c = alpha * op(a) op(b) + beta * c in FP32 by oneDNN's sgemm (f32_gemm).
void f32_gemm(bool a_transposed, bool b_transposed, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
              std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);

// "oneDNN <version> sgemm, <the instruction set its JIT kernels use here>".
std::string f32_gemm_kernels();

}  // namespace moequant::detail
