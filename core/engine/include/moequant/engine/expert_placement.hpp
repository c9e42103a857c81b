// Which routed experts to keep on the GPU (moequant plan): the routers of the model are run on
// recorded MoE inputs (conventions.md §4) to measure how often each expert is chosen, and a
// placement picks the GPU ("hot") experts, the rest staying on the CPU ("cold"), as kt-kernel's
// gpu_experts_mask expects. Strategies follow kt-kernel's: "frequency" takes the most chosen
// experts over all layers (generate_gpu_experts_masks), "uniform" the same number in every layer
// (the most chosen of each), "front-loading" fills layers from the first on.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/engine/calibration_activations.hpp>
#include <moequant/engine/progress.hpp>
#include <moequant/model_adapter.hpp>

#include <cstdint>
#include <string_view>
#include <vector>

namespace moequant {

struct ExpertActivity {
    std::int64_t tokens = 0;                      // selected calibration tokens per layer
    std::int64_t experts = 0;                     // routed experts per layer
    std::int64_t top_k = 0;
    std::vector<std::int64_t> layers;             // MoE layer indices
    std::vector<std::vector<std::int64_t>> counts;  // [layer][expert]: tokens routed to it (a layer sums to tokens x top_k)
};

// Routes every selected token of every MoE layer (Error(input) naming a missing or misshapen
// router tensor, before any routing); one `progress` step per layer.
ExpertActivity measure_expert_activity(const CalibrationActivations& calibration, const ModelPlan& plan,
                                                    const Checkpoint& source, ProgressSink* progress = nullptr);

enum class PlacementStrategy { frequency, uniform, front_loading };
std::string_view placement_strategy_name(PlacementStrategy s) noexcept;

// gpu[layer][expert]: the expert goes to the GPU. `gpu_experts` counts experts over all layers
// (generate_gpu_experts_masks' total; SGLang's --kt-num-gpu-experts is per MoE layer); Error(usage) when it is negative or above the total.
// Ties go to the lower layer, then the lower expert.
std::vector<std::vector<bool>> place_gpu_experts(const ExpertActivity& activity, std::int64_t gpu_experts,
                                                              PlacementStrategy strategy);

}  // namespace moequant
