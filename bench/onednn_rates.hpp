// The machine's own matrix-product rates, the reference every compute bench reports against:
// oneDNN's FP32 GEMM (dnnl_sgemm) and its BF16 matmul (BF16 operands, FP32 accumulation and
// result), each on the bench's thread count, measured in the same run as what they judge.
// oneDNN picks its kernels by instruction set (JIT), so its rate is what this CPU can do, not
// what moequant's own BLAS choice makes of it.
#pragma once

#include <cstdint>
#include <string>

namespace moequant::bench {

struct OnednnRates {
    double f32 = 0;   // dnnl_sgemm, n x n x n, multiply-adds per second
    double bf16 = 0;  // matmul bf16 x bf16 -> f32, n x n x n, multiply-adds per second
    std::string bf16_kernel;  // oneDNN's name of the BF16 implementation, e.g. "brg:avx512_core_bf16"
};

// Best of `repeats` runs of each product on n x n operands with `threads` OpenMP threads
// (Debian's oneDNN threads with OpenMP; the thread count is restored to one afterwards, as
// moequant's own BF16 products expect).
OnednnRates onednn_rates(std::int64_t n, int threads, int repeats);

}  // namespace moequant::bench
