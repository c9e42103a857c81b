// Large matrix products through oneDNN, whose JIT kernels are chosen by instruction set (its
// rate is this machine's limit in the benches), on the calling thread alone: callers split a
// product into fixed blocks, one per task, so the bytes do not depend on the thread count.
// BLAS-style, row-major: C[m, n] = alpha * op(A) op(B) + beta * C, where op(X) is X or, when
// transposed, X^T; lda, ldb and ldc are the row strides of A, B and C as stored; beta is 0 (C is
// overwritten) or 1 (the product is added to C). The FP32 one is oneDNN's sgemm; the BF16 one
// its matmul on BF16 operands with FP32 accumulation and an FP32 C (it needs AVX-512 in oneDNN
// 2.x: bf16_products_available(), compute_dtype.hpp).
#pragma once

#include <moequant/export.hpp>

#include <cstdint>
#include <string>

namespace moequant {

MOEQUANT_API void f32_gemm(bool a_transposed, bool b_transposed, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                           const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
                           std::int64_t ldc);

MOEQUANT_API void bf16_gemm(bool a_transposed, bool b_transposed, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                            const std::uint16_t* a, std::int64_t lda, const std::uint16_t* b, std::int64_t ldb, float beta,
                            float* c, std::int64_t ldc);

// What runs f32_gemm, e.g. "oneDNN 2.6.3 sgemm, avx512_core_bf16": for --version, run manifests
// and the cluster's check that every rank sums in the same order.
MOEQUANT_API std::string f32_gemm_kernels();

}  // namespace moequant
