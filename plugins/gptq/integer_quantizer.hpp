// The GPU path's quantizers `gptq` and `rtn` (gptq-compressed-tensors.md §2–§4, §6): W4A16 or
// W8A16 symmetric integer codes with BF16 min-max scales, stored as compressed-tensors
// `pack-quantized` parts. `rtn` rounds each weight (QuantizationModifier); `gptq` runs GPTQ on
// the Hessian of the matrix's calibration inputs (GPTQModifier). Both re-derive the stored
// codes the way compressed-tensors does at save time, so the parts are the checkpoint's bytes.
#pragma once

#include "gptq_scheme.hpp"

#include <moequant/quantizer.hpp>

namespace moequant::gptq {

class IntegerQuantizer final : public Quantizer, public QuantizerCalibration {
public:
    IntegerQuantizer(bool gptq, Scheme scheme) : gptq_(gptq), scheme_(scheme) {}

    std::string_view id() const override { return gptq_ ? "gptq" : "rtn"; }
    std::string_view description() const override;
    const Scheme& scheme() const noexcept { return scheme_; }

    // The scheme W4A16 / W8A16; gptq is measured against rtn of the same scheme.
    Options facts() const override;

    // Options: see parse_scheme().
    std::shared_ptr<const Quantizer> configure(const Options& options) const override;

    // num_bits, strategy, group_size (absent for channel), actorder (static | group; absent
    // for none and RTN), dampening_frac (GPTQ), in quantization_config's spelling.
    Options settings() const override;

    // weight_packed I32 [rows, cols*bits/32], weight_scale BF16 [rows, groups], weight_shape
    // I64 [2], and weight_g_idx I32 [cols] with actorder "group". Needs cols divisible by the
    // group size (and by 8).
    std::vector<TensorSpec> output_layout(const Shape& matrix) const override;

    // RTN. For `gptq` it throws Error(usage): GPTQ needs calibration.
    QuantizedTensor quantize(const TensorView& weight) const override;

    // `gptq` is its own calibration facet; `rtn` has none.
    const QuantizerCalibration* calibration() const override { return gptq_ ? this : nullptr; }
    // GPTQ (reached through calibration(), so never for `rtn`).
    std::shared_ptr<const PreparedCalibration> prepare_calibration(const Tensor& hessian) const override;
    QuantizedTensor quantize_calibrated(const TensorView& weight, const PreparedCalibration& calibration) const override;

    // bf16(code * scale) as F32 [rows, cols] (compressed-tensors' decompression).
    Tensor dequantize(const QuantizedTensor& quantized, const Shape& shape) const override;

    // RTN only (GPTQ has no per-element bound): per group, the rounding of the BF16 quotient,
    // the clamp at the top of the code range and the BF16 rounding of the dequantized value.
    std::optional<Tensor> error_bounds(const QuantizedTensor& quantized, const Shape& shape) const override;

    // weight_shape must hold the source matrix's [rows, cols], and the stored scales must be the
    // min-max observer's on the source, per group (the groups of weight_g_idx when present), bit
    // for bit; with symmetric codes no code may be the lowest one.
    std::string stored_problem(const QuantizedTensor& stored, const TensorView& source) const override;

    // Decodes the packed words of each row in storage order.
    bool packed_gemv(const QuantizedTensor& quantized, const Shape& shape, const float* x, float* y) const override;

private:
    bool gptq_;
    Scheme scheme_;
};

}  // namespace moequant::gptq
