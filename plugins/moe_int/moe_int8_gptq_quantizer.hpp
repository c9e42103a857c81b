// The calibrated MOE_INT8 quantizer `moe-int8-gptq`: kt-kernel's MOE_INT8 bytes (AOCL's reordered
// int8 blocks of 32 gate/up or 64 down rows, their column sums, the F32 row scales), unchanged,
// with codes chosen by GPTQ's error feedback over the inputs each matrix saw instead of
// round-to-nearest (docs/kt-moe-int8.md, "Calibrated"). kt decodes a code q of row r as q * d_r
// whatever d_r is, so each row's scale is searched as f * d_kt (f in [0.5, 1]) and then held
// fixed while GPTQ chooses codes in -127..127 (fixed_scale_gptq.hpp, shared with the calibrated
// AMX quantizers). AOCL's GEMM multiplies every int8 code exactly; the range is kept symmetric as
// for AMX, so the calibrated codes are ones kt's own quantizer could write.
#pragma once

#include "fixed_scale_gptq.hpp"
#include "moe_int8_quantizer.hpp"

#include <moequant/quantizer.hpp>

#include <memory>

namespace moequant::moe_int {

class MoeInt8GptqQuantizer final : public Quantizer, public QuantizerCalibration {
public:
    // The registered quantizer: like moe-int8 it packs no matrix itself but hands each to its
    // gate/up or down variant (for_matrix()), which the host quantizes through.
    explicit MoeInt8GptqQuantizer(gptq::FixedScaleSettings settings = {});

    std::string_view id() const override { return "moe-int8-gptq"; }
    std::string_view description() const override;
    // moe-int8's (kt.method and kt.file_prefix MOE_INT8: the kt formats write the same names);
    // verify measures against moe-int8.
    Options facts() const override;
    // Options as the calibrated AMX quantizers: actorder static|none, dampening_frac, scale
    // searched|kt (gptq::configure_fixed_scale()).
    std::shared_ptr<const Quantizer> configure(const Options& options) const override;
    Options settings() const override { return gptq::fixed_scale_settings(settings_); }
    const Quantizer* for_matrix(const MatrixRole& role) const override;

    std::vector<TensorSpec> output_layout(const Shape& matrix) const override { return layout().output_layout(matrix); }
    // Refuses (Error(usage)): the codes need the calibration facet.
    QuantizedTensor quantize(const TensorView& weight) const override;
    const QuantizerCalibration* calibration() const override { return this; }

    Tensor dequantize(const QuantizedTensor& q, const Shape& shape) const override { return layout().dequantize(q, shape); }
    bool packed_gemv(const QuantizedTensor& q, const Shape& shape, const float* x, float* y) const override {
        return layout().packed_gemv(q, shape, x, y);
    }
    // No per-element bound (GPTQ moves codes by more than half a step on purpose). What can be
    // checked exactly: moe-int8's column sums and zero padding, every code in -127..127, and
    // each row scale in [fl(0.5 d_kt), d_kt] of the source row (0 for an all-zero row).
    std::string stored_problem(const QuantizedTensor& stored, const TensorView& source) const override;

    // GPTQ's dampened, reordered inverse-Hessian factor and diag(H): the same for every variant.
    std::shared_ptr<const PreparedCalibration> prepare_calibration(const Tensor& hessian) const override;
    // The variant's blocks: searched scales, GPTQ codes, column sums of those codes.
    QuantizedTensor quantize_calibrated(const TensorView& weight, const PreparedCalibration& calibration) const override;

private:
    MoeInt8GptqQuantizer(const MoeInt8Quantizer& layout, gptq::FixedScaleSettings settings)
        : settings_(settings), layout_(&layout) {}

    // The plain variant whose bytes this one writes; Error(internal) on the registered object.
    const MoeInt8Quantizer& layout() const;

    gptq::FixedScaleSettings settings_;
    std::shared_ptr<const MoeInt8Quantizer> plain_;  // the registered object's: owns the plain variants
    const MoeInt8Quantizer* layout_ = nullptr;       // a variant's plain variant (NB 32 or 64)
    std::unique_ptr<const MoeInt8GptqQuantizer> gate_up_, down_;
};

}  // namespace moequant::moe_int
