// The calibrated AMX quantizers `amx-int4-gptq` and `amx-int8-gptq`: kt-kernel's AMXINT4 /
// AMXINT8 byte layout, unchanged, with codes chosen by GPTQ's error feedback over the inputs
// each matrix saw instead of round-to-nearest (docs/calibrated-amx.md). The runtime decodes a
// code q of row r as q * d_r (INT8) or q * 16 d_r (INT4) whatever d_r is, so each row's scale
// is first searched on the calibration inputs: the multiple f * d_kt (f in [0.5, 1], d_kt
// kt-kernel's own amax rule) with the least diag(H)-weighted rounding error, then held fixed
// while GPTQ chooses the codes, in kt-kernel's own range (-7..7, -127..127: its integer products
// get the lowest code's sign wrong, docs/kt-arithmetic.md), clamped inside the loop so that the
// error feedback sees the clamp. The search and the loop are fixed_scale_gptq.hpp's, shared with
// the calibrated MOE_INT8 quantizer.
#pragma once

#include "amx_quantizer.hpp"
#include "fixed_scale_gptq.hpp"

#include <moequant/quantizer.hpp>

namespace moequant::amx {

using CalibratedSettings = gptq::FixedScaleSettings;

class AmxCalibratedQuantizer final : public Quantizer, public QuantizerCalibration {
public:
    AmxCalibratedQuantizer(Method method, CalibratedSettings settings) : plain_(method), method_(method), settings_(settings) {}

    std::string_view id() const override;
    std::string_view description() const override;
    // kt-kernel's AMXINT4 / AMXINT8 (the files are theirs); verify measures against the plain
    // quantizer of the same method.
    Options facts() const override;
    // Options: actorder static|none, dampening_frac (0 < f < 1), scale_search true|false;
    // other keys (an output's recorded facts) are ignored. Error(usage) for a bad value.
    std::shared_ptr<const Quantizer> configure(const Options& options) const override;
    // calibration "gptq", actorder, dampening_frac, scale ("searched" or "kt"), code_range
    // "symmetric", recorded in the output's __metadata__ and run manifest.
    Options settings() const override;

    std::vector<TensorSpec> output_layout(const Shape& matrix) const override { return plain_.output_layout(matrix); }
    // Refuses (Error(usage)): the codes need the calibration facet.
    QuantizedTensor quantize(const TensorView& weight) const override;
    const QuantizerCalibration* calibration() const override { return this; }

    Tensor dequantize(const QuantizedTensor& q, const Shape& shape) const override { return plain_.dequantize(q, shape); }
    bool packed_gemv(const QuantizedTensor& q, const Shape& shape, const float* x, float* y) const override {
        return plain_.packed_gemv(q, shape, x, y);
    }
    // No per-element bound: GPTQ moves codes by more than half a step on purpose (the default
    // nullopt). What can be checked exactly is stored_problem()'s.
    // Each row's scale is d_kt times a factor in [0.5, 1] of the source row (0 for an all-zero
    // row, whose codes are 0), and every code is in kt-kernel's range (kt_range_problem());
    // empty when both hold.
    std::string stored_problem(const QuantizedTensor& stored, const TensorView& source) const override;
    // The codes are chosen by division, never through kt-kernel's overflowing 1/d: no row saturates.
    std::vector<std::int64_t> saturated_rows(const QuantizedTensor&, const Shape&) const override { return {}; }

    // The dampened, reordered inverse-Hessian factor (shared with GPTQ) and diag(H) for the
    // scale search.
    std::shared_ptr<const PreparedCalibration> prepare_calibration(const Tensor& hessian) const override;
    QuantizedTensor quantize_calibrated(const TensorView& weight, const PreparedCalibration& calibration) const override;

private:
    AmxQuantizer plain_;  // the layout: dequantize, packed products
    Method method_;
    CalibratedSettings settings_;
};

}  // namespace moequant::amx
