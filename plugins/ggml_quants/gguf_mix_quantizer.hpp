// The `gguf` quantizer: the experts of a GGUF file whose types the gguf format chose per tensor
// (llama-quantize's mixture: Q4_K_M puts some layers' ffn_down_exps in Q6_K). The format hands
// it, through Quantizer::configure(), option gguf.expert_types, "LAYER:GATE,UP,DOWN;..." with
// ggml's type names; each expert matrix then goes to the gguf-<type> quantizer of its tensor
// (for_matrix()). The registered object, unconfigured, quantizes nothing. With option
// gguf.carry=mxfp4 (the format sets it when the source stores its experts in MXFP4, as gpt-oss
// and DeepSeek-V4 do) its MXFP4 tensors carry the stored codes (carried_mxfp4_quantizer.hpp) and
// its other tensors quantize the decoded values, as llama-quantize copies MXFP4 and converts the
// rest; the mixture's own carrier binds the job to that source.
//
// `gguf-gptq` is the same mixture with codes chosen by GPTQ on calibration inputs
// (gguf_gptq_quantizer.hpp): each matrix goes to the GPTQ variant of its type, through the
// calibration facet; options actorder (static|none) and dampening_frac as the gptq command's.
#pragma once

#include "carried_mxfp4_quantizer.hpp"
#include "ggml_quantizer.hpp"
#include "gguf_gptq_quantizer.hpp"

#include <array>
#include <map>
#include <memory>
#include <vector>

namespace moequant::ggml_quants {

class GgufMixQuantizer final : public Quantizer, public QuantizerImportance, public StoredCodeCarrier, public QuantizerCalibration {
public:
    explicit GgufMixQuantizer(bool gptq = false);

    std::string_view id() const override { return gptq_ ? "gguf-gptq" : "gguf"; }
    std::string_view description() const override;
    Options facts() const override;
    Options settings() const override;
    std::shared_ptr<const Quantizer> configure(const Options& options) const override;
    const Quantizer* for_matrix(const MatrixRole& role) const override;
    // The variants pack; the mixture itself refuses (Error(usage) unconfigured, Error(internal) configured).
    std::vector<TensorSpec> output_layout(const Shape& matrix) const override;
    QuantizedTensor quantize(const TensorView& weight) const override;
    // Every variant weighs columns by importance (an imatrix, or one measured on calibration
    // data); the mixture itself refuses as quantize() does.
    QuantizedTensor quantize_weighted(const TensorView& weight, std::span<const float> column_weights) const override;
    // The importance facet of the plain mixture; gguf-gptq has the calibration facet instead.
    const QuantizerImportance* importance() const override { return gptq_ ? nullptr : this; }
    const QuantizerCalibration* calibration() const override { return gptq_ ? this : nullptr; }
    Tensor dequantize(const QuantizedTensor& quantized, const Shape& shape) const override;
    // Any variant's preparation (they share one); the mixture itself quantizes nothing.
    std::shared_ptr<const PreparedCalibration> prepare_calibration(const Tensor& hessian) const override;
    QuantizedTensor quantize_calibrated(const TensorView& weight, const PreparedCalibration& calibration) const override;

    const StoredCodeCarrier* carrier() const override { return carry_mxfp4_ ? this : nullptr; }
    // Error(input) naming the tensor when the expert is not stored as MXFP4 rows ggml's blocks can take.
    std::shared_ptr<const Quantizer> bind_source(const Checkpoint& checkpoint, const ExpertWeightSource& source) const override;
    QuantizedTensor carry(const Checkpoint& checkpoint, const ExpertWeightSource& source) const override;

private:
    // One quantizer per type, shared by every configured mixture.
    std::shared_ptr<const std::vector<std::unique_ptr<GgmlQuantizer>>> types_;
    // gguf-gptq: the GPTQ variant of each of types_ (same order), made with the job's settings.
    bool gptq_ = false;
    gptq::FixedScaleSettings settings_;
    std::shared_ptr<const std::vector<std::unique_ptr<GgufGptqQuantizer>>> gptq_types_;
    std::map<std::int64_t, std::array<const GgmlQuantizer*, 3>> layers_;  // by layer: gate, up, down
    std::string expert_types_;  // the option as given, for settings()
    bool carry_mxfp4_ = false;  // gguf.carry=mxfp4
    std::shared_ptr<const CarriedMxfp4Quantizer> carried_;  // with carry_mxfp4_
};

}  // namespace moequant::ggml_quants
