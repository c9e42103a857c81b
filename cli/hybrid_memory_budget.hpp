// How many routed experts per MoE layer the GPU holds (`moequant hybrid --gpu-memory`) and how
// many the CPU must hold (`--cpu-memory`): the GPU checkpoint's weights split into what SGLang
// always keeps on the GPU (attention, embeddings, norms, shared experts, dense layers, the head)
// and each MoE layer's routed experts, and the CPU experts' bytes per MoE layer. kt-kernel's
// SGLang integration takes --kt-num-gpu-experts per MoE layer, so counts are per layer.
// docs/hybrid.md.
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

// One routed expert of each MoE layer in kt-kernel's CPU layout (plan order), and the CPU memory
// they need when k experts of every layer are on the GPU.
struct CpuExpertBytes {
    std::vector<std::uint64_t> expert_per_layer;
    std::int64_t experts = 0;  // routed experts per layer

    std::uint64_t expert_row() const;
    std::uint64_t needed(std::int64_t gpu_per_layer) const { return expert_row() * static_cast<std::uint64_t>(experts - gpu_per_layer); }
    // The fewest GPU experts per layer that leave the rest within `budget`.
    std::int64_t fewest_gpu_experts(std::uint64_t budget) const;
};

// A written kt-safetensors output's expert tensors (blk.L.ffn_{gate,up,down}_exps.E.*), by size.
CpuExpertBytes measured_cpu_expert_bytes(const Checkpoint& cpu_output, const ModelPlan& plan);
// The same before anything is written: kt's AMX layout of `bits`-bit codes, an F32 scale per row.
CpuExpertBytes estimated_cpu_expert_bytes(const ModelPlan& plan, int bits);

// The tensors of a written GPU checkpoint (a gptq output of `plan`'s model), by their stored sizes.
GpuWeightBytes measured_gpu_weight_bytes(const Checkpoint& gpu_output, const ModelPlan& plan);

// The same before anything is written: every tensor but the routed experts in BF16, and each
// routed expert matrix [out, in] as compressed-tensors W4A16 stores it with groups of
// `group_size` (packed codes, BF16 scales, the shape).
GpuWeightBytes estimated_gpu_weight_bytes(const Checkpoint& source, const ModelPlan& plan, std::int64_t group_size);

}  // namespace moequant::cli
