// GPTQ for kt-kernel's per-row symmetric layouts (the calibrated AMXINT4 / AMXINT8 and MOE_INT8
// quantizers): the runtime decodes a code q of row r as q * step(d_r) whatever d_r is, so each
// row's scale is first searched on the calibration inputs, as the multiple f * d_kt (f in
// [0.5, 1], d_kt the layout's own amax rule) with the least diag(H)-weighted rounding error,
// then held fixed while GPTQ's column loop chooses the codes in the symmetric range (-7..7,
// -127..127), clamped inside the loop so that the error feedback sees the clamp
// (docs/calibrated-amx.md). What differs between the layouts (the amax rule, how a scale
// becomes a step, the packing) stays with each quantizer; this is the part they share.
#pragma once

#include "gptq_scheme.hpp"
#include "inverse_hessian.hpp"

#include <moequant/options.hpp>
#include <moequant/quantizer.hpp>
#include <moequant/tensor.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace moequant::gptq {

// The searched factors of d_kt go down to this: below half of the layout's scale a row would
// clip more than a quarter of its range, which no weight distribution rewards.
inline constexpr double search_floor = 0.5;

// The job options a calibrated kt quantizer takes.
struct FixedScaleSettings {
    bool actorder = true;         // columns in decreasing diag(H) order ("static"), else "none"
    double dampening_frac = 0.1;  // GPTQ's dampening, relative to mean(diag H)
    bool scale_search = true;     // search each row's scale; false keeps the layout's d_kt
};

// `current` updated from options actorder static|none, dampening_frac (0 < f < 1), scale
// searched|kt; other keys (an output's recorded facts) are ignored. Error(usage) naming `id`
// for a bad value.
FixedScaleSettings configure_fixed_scale(const FixedScaleSettings& current, const Options& options, std::string_view id);
// calibration "gptq", actorder, dampening_frac, scale ("searched" or "kt"), code_range
// "symmetric": what the output's __metadata__ and run manifest record.
Options fixed_scale_settings(const FixedScaleSettings& settings);

// The GPTQ scheme of `bits`-bit codes, one scale per row, in the symmetric range.
Scheme fixed_scale_scheme(int bits, const FixedScaleSettings& settings);

// What prepare_calibration() derives from a Hessian: GPTQ's inverse factor and diag(H) for the
// scale search. It depends on the Hessian and the settings only, so every variant of a
// quantizer (MOE_INT8's gate/up and down blocks) accepts any other's.
struct FixedScaleCalibration final : PreparedCalibration {
    InverseHessian inverse;
    std::vector<float> diagonal;
};
std::shared_ptr<const FixedScaleCalibration> prepare_fixed_scale(const Tensor& hessian, const Scheme& scheme);
// `calibration` as prepare_fixed_scale() made it, for a matrix of `k` columns; Error(internal)
// naming `id` when it is another quantizer's or of another width.
const FixedScaleCalibration& fixed_scale_calibration(const PreparedCalibration& calibration, std::int64_t k, std::string_view id);

// The Error(usage) a calibrated quantizer's quantize() throws: it needs calibration inputs.
[[noreturn]] void refuse_without_calibration(std::string_view id, std::string_view plain_id);

// A BF16, F16 or F32 weight as F32 values, F16 and F32 first rounded to BF16 (as kt's converter
// loads them).
std::vector<float> bf16_rounded_values(const TensorView& weight);

// How a layout turns a row's absmax into its scale d_kt, and a scale d into the step between
// decoded codes (d for INT8, 16 d for AMXINT4's nibbles).
struct RowScaleRule {
    float (*kt_scale)(float amax);
    float step_per_scale = 1.0f;
};

struct FixedScaleCodes {
    std::vector<float> scales;        // [rows]: the stored d; 0 for an all-zero row
    std::vector<std::int8_t> codes;   // [rows, cols], in scheme.qmin()..qmax(); 0 on an all-zero row
};

// The codes and scales of `w` [rows, cols] (bf16_rounded_values()): per row d = f * d_kt (f
// searched when settings.scale_search, else 1), then GPTQ's column loop at those scales.
// The result does not depend on the thread count.
FixedScaleCodes solve_fixed_scale(const std::vector<float>& w, std::int64_t rows, std::int64_t cols,
                                  const FixedScaleCalibration& calibration, const Scheme& scheme, bool scale_search,
                                  const RowScaleRule& rule);

// What a per-row kt layout stores: `method`, the part "weight" (the packed codes) and the part
// "scale" (`scales` as F32 [rows]).
QuantizedTensor row_scaled_tensor(std::string method, Tensor packed, const std::vector<float>& scales);

// The rows of `source` whose stored scale d[r] lies outside [fl(search_floor * d_kt), d_kt] (0
// exactly for an all-zero row) as a sentence naming the first; empty when there are none.
std::string scale_range_problem(const TensorView& source, const float* d, const RowScaleRule& rule);

}  // namespace moequant::gptq
