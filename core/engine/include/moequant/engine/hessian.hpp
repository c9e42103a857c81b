// The input Hessian GPTQ works from (gptq-compressed-tensors.md §4.1): H = 2/n * sum of x x^T
// over every token x a Linear saw, where n counts calibration samples (forward calls), not
// tokens. Accumulated in F32 like the reference, from the inputs multiplied by fl32(sqrt 2);
// only the upper triangle's tiles are computed (H is symmetric), mirrored once in finish().
// The tiles are oneDNN products (matrix_products.hpp) read straight from the inputs' rows and
// added in place, each on one thread: fixed tiles, so the bytes do not depend on the threads.
// With compute dtype bf16 (compute_dtype.hpp) inputs that BF16 holds exactly — recorded
// activations, a BF16 model's, the BF16 forward's — are multiplied as BF16 with FP32
// accumulation (oneDNN): exact products 2 x_i x_j, where the FP32 path rounds (fl(sqrt 2) x)
// first, so H agrees with it to float rounding.
#pragma once

#include <moequant/tensor.hpp>

#include <cstdint>
#include <vector>

namespace moequant {

class HessianAccumulator {
public:
    explicit HessianAccumulator(std::int64_t columns);

    std::int64_t columns() const noexcept { return columns_; }

    // Adds the tokens of `inputs`, [tokens, columns] BF16 or F32 (tiles of H in parallel).
    void add(const TensorView& inputs);
    // Adds `tokens` rows of F32 inputs, row-major with `columns` values each.
    void add(const float* inputs, std::int64_t tokens);

    // H = sum / samples, F32 [columns, columns], symmetric, made in the accumulator's own buffer
    // (so once: the accumulator is spent). Throws Error(input) when samples <= 0.
    Tensor finish(std::int64_t samples);

private:
    void add_bf16_rows(const std::uint16_t* rows, std::int64_t tokens);
    // H += A^T A for the first `tokens` rows of scaled_ (A = fl32(sqrt 2) x, FP32 tiles).
    void add_scaled_rows(std::int64_t tokens);
    Tensor& working_buffer(Tensor& buffer, DType dtype, std::int64_t tokens);

    std::int64_t columns_;
    Tensor sums_;                       // sum of (sqrt2 x)(sqrt2 x)^T, row-major, upper triangle valid
    bool added_ = false;                // whether sums_ holds any product yet (unwritten before)
    Tensor scaled_;                     // fl32(sqrt 2) x of the FP32 path, reused
    Tensor bf16_;                       // BF16-exact floats as BF16, reused
};

// Whether BF16 holds every one of the values exactly (its low 16 bits are zero): when BF16
// products multiply them exactly.
bool bf16_exact(const float* values, std::size_t n) noexcept;

// Sum over rows of (W_a - W_b) H (W_a - W_b)^T's diagonal: the squared output error
// ||X (W_a - W_b)^T||^2 * 2/n on the calibration data H came from. W_*: F32 [rows, cols].
double output_error(const Tensor& hessian, const float* w_a, const float* w_b, std::int64_t rows);

// The Hessian of columns [first, first + count) of the inputs: H's diagonal block, which is
// what a matrix split by columns (a down_proj threadpool part, split_expert_part) sees.
Tensor hessian_block(const Tensor& hessian, std::int64_t first, std::int64_t count);

}  // namespace moequant
