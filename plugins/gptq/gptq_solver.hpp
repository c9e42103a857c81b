// GPTQ's column loop (gptq-compressed-tensors.md §4.2): quantize the columns in the prepared
// order, 128 at a time, spreading each column's rounding error over the columns not yet
// quantized (rank-1 inside a block, one matrix product per block for the rest).
#pragma once

#include "gptq_scheme.hpp"
#include "inverse_hessian.hpp"

#include <cstdint>
#include <vector>

namespace moequant::gptq {

struct GptqResult {
    // GPTQ's weight after the loop, F32 [rows, cols], original order: q * s per element,
    // rounded to BF16 (F32 scales, actorder "group": not rounded; the module stores it as BF16).
    std::vector<float> weight;
    // The loss llm-compressor logs: sum over rows of sum_j (w - q)^2 / U_jj^2 / 2.
    double loss = 0;
};

// How GPTQ's loop rounds one column: the representable values nearest the working weights
// w[0..n) of rows r0..r0+n at permuted position `position` (original column `column`), written
// to q[0..n). Called for disjoint rows from several threads at once; implementations that
// record the codes they choose write each (row, column) once.
class ColumnRounding {
public:
    virtual ~ColumnRounding() = default;
    virtual void round(std::int64_t position, std::int64_t column, std::int64_t r0, std::int64_t n, const float* w,
                       float* q) const = 0;
};

// GPTQ's loop with any rounding: the grid (its steps, offsets and code range per group) is the
// rounding's, fixed before the loop. weight: [rows, cols] row-major, original column order.
// Without `keep_weight` the result's weight stays empty (a rounding that records its codes
// needs no second copy of the matrix).
GptqResult run_gptq(const float* weight, std::int64_t rows, const InverseHessian& prepared, const ColumnRounding& rounding,
                    bool keep_weight = true);

// weight: [rows, cols] values (BF16-exact), row-major, original column order.
// scales[row * groups + group_of[position]]: the F32 scale GPTQ uses at permuted position
// `position` of row `row`. Rows are independent and run in parallel in blocks; the result does
// not depend on how many threads there are. `f32_scales`: the scales are GPTQ's own F32
// re-observation (actorder "group"), whose fake-quantized values stay F32.
GptqResult run_gptq(const float* weight, std::int64_t rows, const InverseHessian& prepared, const Scheme& scheme,
                    const std::vector<float>& scales, std::int64_t groups, const std::vector<std::int32_t>& group_of,
                    bool f32_scales = false);

}  // namespace moequant::gptq
