// The machine's own matrix-product rates, the reference every compute bench reports against:
// oneDNN's FP32 GEMM (dnnl_sgemm) and its BF16 matmul (BF16 operands, FP32 accumulation and
// result), each on the bench's thread count, measured in the same run as what they judge.
// oneDNN picks its kernels by instruction set (JIT), so its rate is what this CPU can do, not
// what moequant's own BLAS choice makes of it.
#pragma once

#include <cstdint>
#include <functional>
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

// A step timed next to its reference: the best of `repeats` runs of `step`, with oneDNN's
// rates (2048^3, best of 2) measured before each run and after the last. `reference` holds the
// fastest of those measurements, per dtype: conservative, and local in time. The build VM's
// rates drift by up to 2x within one run (a neighbour on the sibling hyperthreads), so a
// reference measured minutes away can make a step look twice as fast or as slow as it is.
struct TimedStep {
    double seconds = 0;
    OnednnRates reference;
};
TimedStep time_against_reference(int repeats, int threads, const std::function<void()>& step);

}  // namespace moequant::bench
