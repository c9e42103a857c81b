// The hybrid model eval measures (kt-kernel + SGLang serving): the experts a placement puts on
// the GPU come from the GPU output (compressed-tensors), every other one from the CPU output
// (kt AMX). The placement is `moequant plan`'s JSON: per MoE layer its `gpu_experts_mask`
// (kt-kernel's gpu_experts_mask); a layer it does not list keeps all its experts on the CPU.
#pragma once

#include <moequant/engine/quantized_experts.hpp>
#include <moequant/model_adapter.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <vector>

namespace moequant {

// gpu[layer][expert id]: the expert runs on the GPU.
using GpuPlacement = std::map<std::int64_t, std::vector<bool>>;

// Reads a placement file for `plan`: Error(input) naming the file when it is not `moequant
// plan`'s JSON, lists a layer twice or a layer without routed experts, or a mask whose length is
// not the layer's expert count.
GpuPlacement read_gpu_placement(const std::filesystem::path& file, const ModelPlan& plan);

class HybridExperts final : public ReplacementExperts {
public:
    // The three must outlive it.
    HybridExperts(const QuantizedExperts& cpu, const QuantizedExperts& gpu, const ModelPlan& plan, GpuPlacement placement);
    ExpertMatrices layer(std::int64_t layer) const override;
    std::int64_t gpu_experts() const noexcept;  // over all layers

private:
    const QuantizedExperts& cpu_;
    const QuantizedExperts& gpu_;
    const ModelPlan& plan_;
    GpuPlacement placement_;
};

}  // namespace moequant
