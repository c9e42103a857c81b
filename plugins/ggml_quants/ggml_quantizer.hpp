// One quantizer per GGUF tensor type (gguf-q4_k, gguf-q8_0, gguf-bf16, ...): each row of an
// [out, in] matrix into the type's blocks, byte for byte as ggml's reference code writes them
// (ggml_types.hpp), as one part "weight" U8 [out, bytes per row]: a GGUF tensor's data, rows in
// order. The GGUF format names the type from the facts gguf.type (ggml's name, e.g. q4_K) and
// gguf.type_id (enum ggml_type). The input must have a multiple of the type's block per row.
#pragma once

#include "ggml_types.hpp"

#include <moequant/quantizer.hpp>

#include <string>

namespace moequant::ggml_quants {

class GgmlQuantizer final : public Quantizer, public QuantizerImportance {
public:
    explicit GgmlQuantizer(const GgmlType& type);

    std::string_view id() const override { return id_; }
    std::string_view description() const override { return description_; }
    Options facts() const override;
    std::vector<TensorSpec> output_layout(const Shape& matrix) const override;
    // weight: [out, in] BF16, F16 or F32, each row taken as float32 as llama-quantize reads it.
    QuantizedTensor quantize(const TensorView& weight) const override;
    // F16 starts from the float32 decode, as llama.cpp's converter writes `--outtype f16`. BF16
    // from float32 equals the BF16 decode, and the quantized types start from the BF16 GGUF's
    // values, as llama-quantize reads the converter's BF16 file.
    bool takes_float32_source() const override { return type_.name == "f16"; }
    // With an importance matrix entry: one weight per column, as llama-quantize passes each
    // expert's slice to ggml_quantize_chunk() (types ggml quantizes without one ignore it).
    QuantizedTensor quantize_weighted(const TensorView& weight, std::span<const float> column_weights) const override;
    const QuantizerImportance* importance() const override { return this; }
    // The rows back to F32 [out, in] by ggml's to_float arithmetic.
    Tensor dequantize(const QuantizedTensor& quantized, const Shape& shape) const override;

    const GgmlType& type() const noexcept { return type_; }

private:
    QuantizedTensor quantize_rows(const TensorView& weight, const float* column_weights) const;

    const GgmlType& type_;
    std::string id_, description_;
};

}  // namespace moequant::ggml_quants
