// The AMX quantizers `amx-int8` (kt-kernel AMXINT8) and `amx-int4` (AMXINT4): per-row
// symmetric scales and kt-kernel's tile layout, byte for byte (kt-cpu-format.md §3–§4).
#pragma once

#include "amx_layout.hpp"

#include <moequant/quantizer.hpp>

namespace moequant::amx {

// kt-kernel's row scale d for a row whose max |w| is `amax`: amax * fl32(1/127) (INT8, as its
// -ffast-math build computes amax / 127) or amax / 112 (INT4, decoded as q * 16 d).
float kt_row_scale(Method m, float amax) noexcept;

class AmxQuantizer final : public Quantizer {
public:
    // backward: also pack kt-kernel's backward (SFT) weights of every part (amx_backward_weights.hpp).
    explicit AmxQuantizer(Method method, bool backward = false) : method_(method), backward_(backward) {}

    std::string_view id() const override;
    std::string_view description() const override;
    // kt-kernel's AMXINT4 / AMXINT8, in files prefixed INT4 / INT8.
    Options facts() const override;

    // Option backward_weights (true/false, default false): whether every part also gets its
    // backward weights (convert --save-backward-weights; verify passes what an output holds).
    // Other keys are not this quantizer's and are left alone.
    std::shared_ptr<const Quantizer> configure(const Options& options) const override;

    // "weight" I8 [code bytes], "scale" F32 [n]; with backward weights also "backward.weight"
    // I8 and "backward.scale" F32 [k] of the transposed [k, n] matrix.
    std::vector<TensorSpec> output_layout(const Shape& matrix) const override;

    // weight: [n, k] BF16 (F16 and F32 are first rounded to BF16, as the reference converter
    // does). Returns parts "weight" (I8, 1-D, the code bytes of the `_quant_` file) and "scale"
    // (F32, 1-D, n row scales). Rows are quantized in parallel; the bytes do not depend on it.
    QuantizedTensor quantize(const TensorView& weight) const override;

    // Unpacks the codes and returns q*d (INT8) or q*16*d (INT4) as F32 [n, k].
    Tensor dequantize(const QuantizedTensor& quantized, const Shape& shape) const override;

    // Per row (groups = 1): half a step d (INT8), or 0.53125 of a step 16*d (INT4: the double
    // rounding of §3.2 can lose up to 1/32 of a step more), each plus 2^-14 of a step for the
    // float roundings around it; 256 d for a saturated row (saturated_rows()).
    std::optional<Tensor> error_bounds(const QuantizedTensor& quantized, const Shape& shape) const override;

    // Walks the code bytes once, in storage order (N-block, K-block, row group, tile, panel,
    // line, row), the way an AMX kernel streams B tiles (amx_packed_gemv.cpp).
    bool packed_gemv(const QuantizedTensor& quantized, const Shape& shape, const float* x, float* y) const override;

    // Rows whose scale d is below 2^-128 (max |w| below about 3.3e-37), where 1/d overflows
    // and the codes saturate; error_bounds() gives them 256 d.
    std::vector<std::int64_t> saturated_rows(const QuantizedTensor& quantized, const Shape& shape) const override;

    // The codes kt-kernel's runtime multiplies right (kt_range_problem()); with backward
    // weights also theirs, decoded against the source transposed within their rows' bounds.
    std::string stored_problem(const QuantizedTensor& stored, const TensorView& source) const override;

    // Codes of -128 (INT8) or -8 (INT4), whoever wrote them: kt-kernel's quantizer never does,
    // and its AVX-512 products (the dpbssd emulation) multiply them with the wrong sign
    // (docs/kt-arithmetic.md). Saturated rows are left out: kt writes such codes there itself,
    // and their scale makes every product vanish. Empty when there are none.
    std::string kt_range_problem(const QuantizedTensor& quantized, const Shape& shape) const;

private:
    std::string kt_method_name() const;  // AMXINT4 / AMXINT8

    // Codes and row scales of a BF16 [n, k] matrix in kt-kernel's layout.
    std::pair<Tensor, Tensor> pack(const std::uint16_t* bf16, std::int64_t n, std::int64_t k) const;
    // What the backward parts of `stored` get wrong for the [n, k] source; empty when nothing.
    std::string backward_problem(const QuantizedTensor& stored, const TensorView& source) const;

    struct PackedParts {
        const std::uint8_t* codes;
        const float* scales;
        std::int64_t n, k;
    };
    // The "weight" and "scale" parts, checked against `shape`.
    PackedParts packed_parts(const QuantizedTensor& quantized, const Shape& shape) const;

    Method method_;
    bool backward_ = false;
};

}  // namespace moequant::amx
