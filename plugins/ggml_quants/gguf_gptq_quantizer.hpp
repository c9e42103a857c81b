// GPTQ for the GGUF tensor types (`convert --format gguf --calibrate --gptq`, docs/gguf-gptq.md).
// A matrix is first quantized by ggml's own importance-weighted path with diag(H) as the
// importance — what llama-quantize does with an importance matrix measured on the same tokens
// (the mean square of each input column is diag(H) up to a factor, which the weighted searches
// ignore) — and that fixes every block's scales and minimums. GPTQ's column loop then chooses
// each code on its block's grid (ggml_types.hpp's CodeGrid), spreading every rounding error
// over the columns not yet quantized. The blocks stay the type's own: llama.cpp reads and
// multiplies them as any other. Types without a code grid (F16, BF16) are the weighted path's.
#pragma once

#include "fixed_scale_gptq.hpp"  // plugins/gptq: the dampened inverse Hessian and diag(H)
#include "ggml_quantizer.hpp"

#include <moequant/quantizer.hpp>

namespace moequant::ggml_quants {

class GgufGptqQuantizer final : public Quantizer, public QuantizerCalibration {
public:
    GgufGptqQuantizer(const GgmlQuantizer& plain, gptq::FixedScaleSettings settings);

    std::string_view id() const override { return id_; }
    std::string_view description() const override { return description_; }
    Options facts() const override { return plain_.facts(); }
    std::vector<TensorSpec> output_layout(const Shape& matrix) const override { return plain_.output_layout(matrix); }
    // Refuses (Error(usage)): the codes need the calibration facet.
    QuantizedTensor quantize(const TensorView& weight) const override;
    const QuantizerCalibration* calibration() const override { return this; }
    Tensor dequantize(const QuantizedTensor& quantized, const Shape& shape) const override {
        return plain_.dequantize(quantized, shape);
    }

    std::shared_ptr<const PreparedCalibration> prepare_calibration(const Tensor& hessian) const override;
    QuantizedTensor quantize_calibrated(const TensorView& weight, const PreparedCalibration& calibration) const override;

private:
    const GgmlQuantizer& plain_;
    gptq::FixedScaleSettings settings_;
    std::string id_, description_;
};

}  // namespace moequant::ggml_quants
