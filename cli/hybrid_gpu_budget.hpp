// How many routed experts per MoE layer the GPU holds (`moequant hybrid --gpu-memory`): the GPU
// checkpoint's weights split into what SGLang always keeps on the GPU (attention, embeddings,
// norms, shared experts, dense layers, the head) and each MoE layer's routed experts, and the
// largest count k such that the fixed part plus k experts of every MoE layer fit the budget —
// kt-kernel's SGLang integration takes --kt-num-gpu-experts per MoE layer. docs/hybrid.md.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/model_adapter.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace moequant::cli {

// "24GiB", "24G" (both 2^30), "24GB" (10^9), "512MiB", "80e9", "1073741824": bytes. Error(usage)
// naming `option` for anything else, zero, or more than 2^60.
std::uint64_t parse_memory_size(const std::string& text, const std::string& option);

struct GpuWeightBytes {
    std::uint64_t fixed = 0;                     // everything SGLang keeps on the GPU whatever the placement
    std::vector<std::uint64_t> expert_per_layer; // one routed expert of each MoE layer (plan order)
    bool measured = false;                       // from the written files, not estimated

    // One routed expert of every MoE layer.
    std::uint64_t expert_row() const;
    // The most experts per MoE layer whose weights fit `budget` with the fixed part, at most
    // `experts`; Error(usage) when the fixed part alone does not fit.
    std::int64_t experts_per_layer(std::uint64_t budget, std::int64_t experts) const;
};

// The tensors of a written GPU checkpoint (a gptq output of `plan`'s model), by their stored sizes.
GpuWeightBytes measured_gpu_weight_bytes(const Checkpoint& gpu_output, const ModelPlan& plan);

// The same before anything is written: every tensor but the routed experts in BF16, and each
// routed expert matrix [out, in] as compressed-tensors W4A16 stores it with groups of
// `group_size` (packed codes, BF16 scales, the shape).
GpuWeightBytes estimated_gpu_weight_bytes(const Checkpoint& source, const ModelPlan& plan, std::int64_t group_size);

}  // namespace moequant::cli
