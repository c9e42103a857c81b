// kt-awq: kt-kernel's `convert_cpu_weights.py --quant-method awq` (AWQToColumnMajorConverter),
// which quantizes nothing: it carries an AutoAWQ checkpoint's 4-bit codes, zero points and
// scales over into kt's column-major layout (awq_relayout.hpp), each expert matrix whole.
// Parts of an [n, k] matrix with g = ceil(k / group) groups: "weight" I32 [n, k/8], "qzeros"
// I32 [g, n/8], "scale" [g * n] in the source's scale dtype (AutoAWQ's F16), bytes unchanged.
//
// The registered object is unbound; the host binds it to the source's AWQ form
// (StoredCodeCarrier::bind_source(): group size, scale dtype) before it lays anything out.
// dequantize() gives the values the awq encoding decodes (s x (q - z), rounded to BF16), so
// verify demands them exactly (error bound 0).
#pragma once

#include <moequant/dtype.hpp>
#include <moequant/quantizer.hpp>

#include <cstdint>
#include <memory>

namespace moequant::kt_awq {

// The stored form a bound quantizer carries: AWQ's group size and its scales' dtype.
struct AwqForm {
    std::int64_t group = 0;
    DType scale_dtype = DType::F16;
};

class KtAwqQuantizer final : public Quantizer, public StoredCodeCarrier {
public:
    KtAwqQuantizer() = default;  // unbound: what the plugin registers
    explicit KtAwqQuantizer(AwqForm form) : form_(form) {}

    std::string_view id() const override { return "kt-awq"; }
    std::string_view description() const override;
    Options facts() const override;
    Options settings() const override;
    std::shared_ptr<const Quantizer> configure(const Options& options) const override;
    std::vector<TensorSpec> output_layout(const Shape& matrix) const override;
    QuantizedTensor quantize(const TensorView& weight) const override;
    Tensor dequantize(const QuantizedTensor& quantized, const Shape& shape) const override;
    std::optional<Tensor> error_bounds(const QuantizedTensor& quantized, const Shape& shape) const override;
    const StoredCodeCarrier* carrier() const override { return this; }

    std::shared_ptr<const Quantizer> bind_source(const Checkpoint& checkpoint, const ExpertWeightSource& source) const override;
    QuantizedTensor carry(const Checkpoint& checkpoint, const ExpertWeightSource& source) const override;

private:
    bool bound() const noexcept { return form_.group > 0; }
    AwqForm form_;
};

}  // namespace moequant::kt_awq
