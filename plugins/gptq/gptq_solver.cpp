#include "gptq_solver.hpp"

#include "integer_mapping.hpp"

#include <moequant/parallel.hpp>

#include <Eigen/Core>

#include <algorithm>
#include <atomic>
#include <mutex>

namespace moequant::gptq {

namespace {

using Block = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr std::int64_t block_columns = 128;  // GPTQModifier.block_size
constexpr std::int64_t block_rows = 128;     // rows per task: large enough for the block products to run at GEMM speed

// The symmetric integer schemes' rounding: code = round(clamp(w / s)), value s * code (F32
// scales) or bf16(s * code), with the scale of the row's group at that position.
class ScaleRounding final : public ColumnRounding {
public:
    ScaleRounding(const Scheme& scheme, const std::vector<float>& scales, std::int64_t groups,
                  const std::vector<std::int32_t>& group_of, bool f32_scales)
        : scheme_(scheme), scales_(scales), groups_(groups), group_of_(group_of), f32_scales_(f32_scales) {}

    void round(std::int64_t position, std::int64_t, std::int64_t r0, std::int64_t n, const float* w, float* q) const override {
        const float* s = scales_.data() + group_of_[position];
        for (std::int64_t r = 0; r < n; ++r) {
            const float scale = s[(r0 + r) * groups_];
            const float code = loop_code(w[r], scale, scheme_);
            q[r] = f32_scales_ ? code * scale : dequantized(code, scale);
        }
    }

private:
    const Scheme& scheme_;
    const std::vector<float>& scales_;
    std::int64_t groups_;
    const std::vector<std::int32_t>& group_of_;
    bool f32_scales_;
};

// Quantizes rows [r0, r0 + n) and returns their loss; writes their fake-quantized weights to
// `out` unless it is null.
double solve_rows(const float* weight, std::int64_t r0, std::int64_t n, const InverseHessian& p, const ColumnRounding& rounding,
                  float* out) {
    const std::int64_t k = p.columns;
    Eigen::Map<const RowMajor> u(p.upper.data_as<float>(), k, k);
    // Column-major working copy in the permuted order: one column is n contiguous floats.
    Block w(n, k);
    for (std::int64_t j = 0; j < k; ++j) {
        const std::int64_t c = p.order[j];
        if (p.dead[j])
            w.col(j).setZero();
        else
            for (std::int64_t r = 0; r < n; ++r) w(r, j) = weight[(r0 + r) * k + c];
    }
    std::vector<float> losses(n, 0.0f), q(n);
    Block err(n, block_columns);
    for (std::int64_t i1 = 0; i1 < k; i1 += block_columns) {
        const std::int64_t i2 = std::min(i1 + block_columns, k), width = i2 - i1;
        for (std::int64_t i = 0; i < width; ++i) {
            const std::int64_t col = i1 + i;
            const float d = u(col, col);
            float* wc = w.col(col).data();
            float* ec = err.col(i).data();
            rounding.round(col, p.order[col], r0, n, wc, q.data());
            for (std::int64_t r = 0; r < n; ++r) {
                const float e = (wc[r] - q[r]) / d;
                losses[r] += (wc[r] - q[r]) * (wc[r] - q[r]) / (d * d);
                ec[r] = e;
                wc[r] = q[r];
            }
            for (std::int64_t j = col + 1; j < i2; ++j) {
                const float f = u(col, j);
                float* wj = w.col(j).data();
                for (std::int64_t r = 0; r < n; ++r) wj[r] -= ec[r] * f;
            }
        }
        if (i2 < k)
            w.middleCols(i2, k - i2).noalias() -= err.leftCols(width) * u.block(i1, i2, width, k - i2);
    }
    for (std::int64_t j = 0; out && j < k; ++j) {
        const std::int64_t c = p.order[j];
        for (std::int64_t r = 0; r < n; ++r) out[(r0 + r) * k + c] = w(r, j);
    }
    double loss = 0;
    for (float l : losses) loss += l / 2;
    return loss;
}

}  // namespace

GptqResult run_gptq(const float* weight, std::int64_t rows, const InverseHessian& prepared, const ColumnRounding& rounding,
                    bool keep_weight) {
    GptqResult result;
    if (keep_weight) result.weight.resize(static_cast<std::size_t>(rows * prepared.columns));
    const std::int64_t tasks = (rows + block_rows - 1) / block_rows;
    std::vector<double> losses(tasks, 0.0);
    parallel_for(0, static_cast<std::size_t>(tasks), 1, [&](std::size_t first, std::size_t last) {
        for (std::size_t t = first; t < last; ++t) {
            const std::int64_t r0 = static_cast<std::int64_t>(t) * block_rows;
            losses[t] = solve_rows(weight, r0, std::min(block_rows, rows - r0), prepared, rounding,
                                   keep_weight ? result.weight.data() : nullptr);
        }
    });
    for (double l : losses) result.loss += l;
    return result;
}

GptqResult run_gptq(const float* weight, std::int64_t rows, const InverseHessian& prepared, const Scheme& scheme,
                    const std::vector<float>& scales, std::int64_t groups, const std::vector<std::int32_t>& group_of,
                    bool f32_scales) {
    return run_gptq(weight, rows, prepared, ScaleRounding(scheme, scales, groups, group_of, f32_scales));
}

}  // namespace moequant::gptq
