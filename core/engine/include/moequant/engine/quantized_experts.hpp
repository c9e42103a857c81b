// A converted output's routed experts read back as matrices (eval): each stored part
// dequantized by the quantizer that made it, and a kt output's threadpool parts put back
// together into the full [out, in] matrix (gate/up split by rows, down by columns).
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/decoder_forward.hpp>
#include <moequant/engine/plugin_registry.hpp>
#include <moequant/engine/run_manifest.hpp>
#include <moequant/engine/verification.hpp>
#include <moequant/model_adapter.hpp>

#include <filesystem>
#include <memory>
#include <string>

namespace moequant {

// What eval runs in place of the source's routed experts: one output's, or the hybrid model's.
class ReplacementExperts {
public:
    virtual ~ReplacementExperts();
    // MoE layer `layer`'s experts, dequantized (float32) when asked for: what
    // DecoderLayerForward::mlp() uses in place of the checkpoint's.
    virtual ExpertMatrices layer(std::int64_t layer) const = 0;
};

class QuantizedExperts final : public ReplacementExperts {
public:
    // Opens `directory` and checks that it is an output of `source` as planned by `plan`: its
    // run manifest's source fingerprint, plan digest and every file's digest (when it has one), its recorded expert
    // and part counts, every routed expert's every part present, whole and in the quantizer's
    // layout, and nothing beyond (reading the output once). Error(input) naming the folder otherwise; Error(plugin) when its quantizer is not
    // installed. `source` and `plan` must outlive it.
    QuantizedExperts(const Registry& registry, const std::filesystem::path& directory, const Checkpoint& source,
                     const ModelPlan& plan);

    ExpertMatrices layer(std::int64_t layer) const override;

    const std::string& format() const noexcept { return format_; }
    const std::string& quantizer() const noexcept { return quantizer_id_; }
    int parts() const noexcept { return parts_; }
    // Which side of the hybrid model the output serves, as its reader records ("experts_on":
    // "cpu" for kt-kernel's experts, "gpu" for the GPU's); neither when it does not say.
    bool holds_cpu_experts() const noexcept { return experts_on_ == "cpu"; }
    bool holds_gpu_experts() const noexcept { return experts_on_ == "gpu"; }

private:
    std::filesystem::path directory_;
    const ModelPlan& plan_;
    OpenedOutput output_;
    std::shared_ptr<const Quantizer> quantizer_;
    std::string format_, quantizer_id_, experts_on_;
    int parts_ = 0;

    Tensor matrix(std::int64_t layer, const ExpertWeightSource& source, std::int64_t expert, Projection projection) const;
    Tensor part(const StoredPartKey& key, const Shape& shape) const;
    // The part read, Error(input) unless it is whole and in the quantizer's layout.
    StoredPart check_layout(const StoredPartKey& key, const Shape& shape) const;
    // Error(input, "OutputChanged") naming the first file the manifest records that is missing,
    // of another size or holds other bytes.
    void check_recorded_digests(const RunManifest& manifest) const;
};

}  // namespace moequant
