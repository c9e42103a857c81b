#include "gguf_gptq_quantizer.hpp"

#include "gptq_solver.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/parallel.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

namespace moequant::ggml_quants {
namespace {

// GPTQ's rounding on the grids of a matrix's blocks: each value to the nearest code of its
// group (clamped to the code range, so the clamp's error is fed forward too), recording the
// code. A uniform grid rounds (w - offset) / step as ggml requantizes (x + m) / d; a table's
// levels are searched for the nearest value, the lowest code on a tie. A group whose step is 0
// decodes every code to its offset: code `low` is kept.
class BlockGridRounding final : public gptq::ColumnRounding {
public:
    BlockGridRounding(const CodeGrid& grid, std::int64_t cols, const std::vector<float>& steps, const std::vector<float>& offsets,
                      std::vector<int>& codes)
        : grid_(grid), cols_(cols), groups_(cols / grid.group), steps_(steps), offsets_(offsets), codes_(codes) {}

    void round(std::int64_t, std::int64_t column, std::int64_t r0, std::int64_t n, const float* w, float* q) const override {
        const std::int64_t g = column / grid_.group;
        for (std::int64_t r = 0; r < n; ++r) {
            const std::size_t at = static_cast<std::size_t>((r0 + r) * groups_ + g);
            const float step = steps_[at], offset = offsets_[at];
            const int code = step == 0 ? grid_.low : grid_.table ? nearest_level(w[r], step, offset) : nearest_code(w[r], step, offset);
            codes_[static_cast<std::size_t>((r0 + r) * cols_ + column)] = code;
            q[r] = grid_.value(step, offset, code);  // ggml's dequantized value
        }
    }

private:
    int nearest_code(float w, float step, float offset) const noexcept {
        // w is finite (GPTQ's working weights), so is the quotient once clamped.
        const float t = std::clamp((w - offset) / step, static_cast<float>(grid_.low), static_cast<float>(grid_.high));
        return static_cast<int>(std::nearbyint(t));
    }
    int nearest_level(float w, float step, float offset) const noexcept {
        int best = grid_.low;
        float best_error = std::fabs(w - grid_.value(step, offset, best));
        for (int code = grid_.low + 1; code <= grid_.high; ++code) {
            const float error = std::fabs(w - grid_.value(step, offset, code));
            if (error < best_error) {
                best = code;
                best_error = error;
            }
        }
        return best;
    }

    const CodeGrid& grid_;
    std::int64_t cols_, groups_;
    const std::vector<float>& steps_;
    const std::vector<float>& offsets_;
    std::vector<int>& codes_;
};

}  // namespace

GgufGptqQuantizer::GgufGptqQuantizer(const GgmlQuantizer& plain, gptq::FixedScaleSettings settings)
    : plain_(plain),
      settings_(settings),
      id_(std::string(plain.id()) + "-gptq"),
      description_(std::string(plain.description()) + "; codes chosen by GPTQ on calibration inputs") {}

QuantizedTensor GgufGptqQuantizer::quantize(const TensorView&) const { gptq::refuse_without_calibration(id_, plain_.id()); }

std::shared_ptr<const PreparedCalibration> GgufGptqQuantizer::prepare_calibration(const Tensor& hessian) const {
    // The scheme's bits are not used: only its ordering and dampening shape the inverse.
    return gptq::prepare_fixed_scale(hessian, gptq::fixed_scale_scheme(4, settings_));
}

QuantizedTensor GgufGptqQuantizer::quantize_calibrated(const TensorView& weight, const PreparedCalibration& calibration) const {
    const std::vector<TensorSpec> layout = plain_.output_layout(weight.shape);
    const std::int64_t rows = weight.shape[0], cols = weight.shape[1];
    const gptq::FixedScaleCalibration& prepared = gptq::fixed_scale_calibration(calibration, cols, id_);
    // The importance-weighted blocks: their scales are kept, and are the codes where the type
    // has no code grid.
    QuantizedTensor quantized = plain_.quantize_weighted(weight, prepared.diagonal);
    const GgmlType& type = plain_.type();
    if (!type.grid) return quantized;
    const CodeGrid& grid = *type.grid;
    std::vector<float> w(static_cast<std::size_t>(rows * cols));
    decode_to_f32(weight, w);
    auto* blocks = quantized.parts.front().second.data_as<std::uint8_t>();
    const std::int64_t row_bytes = layout[0].shape[1], per_row = cols / type.block, groups = cols / grid.group;
    const int groups_per_block = type.block / grid.group;
    std::vector<float> steps(static_cast<std::size_t>(rows * groups)), offsets(steps.size());
    parallel_for(0, static_cast<std::size_t>(rows), 16, [&](std::size_t first, std::size_t last) {
        for (std::size_t r = first; r < last; ++r)
            for (std::int64_t b = 0; b < per_row; ++b) {
                const std::size_t at = r * static_cast<std::size_t>(groups) + static_cast<std::size_t>(b * groups_per_block);
                grid.read(blocks + static_cast<std::int64_t>(r) * row_bytes + b * type.block_bytes, steps.data() + at, offsets.data() + at);
            }
    });
    std::vector<int> codes(w.size());
    gptq::run_gptq(w.data(), rows, prepared.inverse, BlockGridRounding(grid, cols, steps, offsets, codes), /*keep_weight=*/false);
    parallel_for(0, static_cast<std::size_t>(rows), 16, [&](std::size_t first, std::size_t last) {
        for (std::size_t r = first; r < last; ++r)
            for (std::int64_t b = 0; b < per_row; ++b)
                grid.write(codes.data() + r * static_cast<std::size_t>(cols) + static_cast<std::size_t>(b * type.block),
                           blocks + static_cast<std::int64_t>(r) * row_bytes + b * type.block_bytes);
    });
    return quantized;
}

}  // namespace moequant::ggml_quants
