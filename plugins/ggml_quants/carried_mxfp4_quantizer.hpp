// MXFP4 expert matrices carried as the source stores them (gpt-oss's, DeepSeek-V4's): each row's
// E8M0 bytes as they are, its nibbles re-laid in ggml's block order — what llama-quantize does
// with a tensor already MXFP4 (it copies it). The `gguf` mixture packs its MXFP4 tensors with
// this when the source stores its experts in MXFP4 (option gguf.carry=mxfp4) and quantizes its
// other tensors from decoded values. Layout, decoding and quantizing (of anything not carried)
// are gguf-mxfp4's.
#pragma once

#include "ggml_quantizer.hpp"

namespace moequant::ggml_quants {

class CarriedMxfp4Quantizer final : public Quantizer, public StoredCodeCarrier {
public:
    explicit CarriedMxfp4Quantizer(const GgmlQuantizer& mxfp4) : mxfp4_(mxfp4) {}

    std::string_view id() const override { return mxfp4_.id(); }
    std::string_view description() const override { return mxfp4_.description(); }
    Options facts() const override { return mxfp4_.facts(); }
    std::vector<TensorSpec> output_layout(const Shape& matrix) const override { return mxfp4_.output_layout(matrix); }
    QuantizedTensor quantize(const TensorView& weight) const override { return mxfp4_.quantize(weight); }
    Tensor dequantize(const QuantizedTensor& quantized, const Shape& shape) const override { return mxfp4_.dequantize(quantized, shape); }
    // gguf-mxfp4's (ggml's MXFP4 takes no importance), so a mixture with an importance matrix still
    // counts as weighing columns: its other tensors use the matrix, the carried ones copy.
    const QuantizerImportance* importance() const override { return mxfp4_.importance(); }

    const StoredCodeCarrier* carrier() const override { return this; }
    // Error(input) naming the tensor when the expert is not stored as MXFP4 rows ggml's blocks can take.
    std::shared_ptr<const Quantizer> bind_source(const Checkpoint& checkpoint, const ExpertWeightSource& source) const override;
    QuantizedTensor carry(const Checkpoint& checkpoint, const ExpertWeightSource& source) const override;

private:
    const GgmlQuantizer& mxfp4_;
};

}  // namespace moequant::ggml_quants
