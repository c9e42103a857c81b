#include "expert_tokens.hpp"

#include <moequant/engine/expert_placement.hpp>
#include <moequant/error.hpp>

#include <algorithm>
#include <numeric>

namespace moequant {

ExpertActivity measure_expert_activity(const CalibrationActivations& calibration, const ModelPlan& plan,
                                       const Checkpoint& source, ProgressSink* progress) {
    calibration.check_plan(plan);
    check_routers(plan, source);
    ExpertActivity a;
    a.tokens = calibration.tokens();
    a.experts = plan.num_experts;
    a.top_k = plan.router.top_k;
    for (const auto& layer : plan.moe_layers) {
        a.layers.push_back(layer.layer);
        std::vector<std::int64_t> counts;
        for (const auto& rows : routed_rows(calibration, plan, layer, source))
            counts.push_back(static_cast<std::int64_t>(rows.size()));
        a.counts.push_back(std::move(counts));
        calibration.release_layer(layer.layer);
        if (progress) progress->step(a.layers.size(), plan.moe_layers.size(), "layer", 0, 0);
    }
    if (progress) progress->finish();
    return a;
}

std::string_view placement_strategy_name(PlacementStrategy s) noexcept {
    switch (s) {
        case PlacementStrategy::frequency: return "frequency";
        case PlacementStrategy::uniform: return "uniform";
        case PlacementStrategy::front_loading: return "front-loading";
    }
    return "?";
}

std::vector<std::vector<bool>> place_gpu_experts(const ExpertActivity& a, std::int64_t gpu_experts, PlacementStrategy strategy) {
    const std::size_t layers = a.layers.size();
    const auto experts = static_cast<std::size_t>(a.experts);
    const auto total = static_cast<std::int64_t>(layers * experts);
    if (gpu_experts < 0 || gpu_experts > total)
        throw Error(ErrorKind::usage,
                    "--num-gpu-experts " + std::to_string(gpu_experts) + " is not between 0 and the model's " +
                        std::to_string(total) + " routed experts (" + std::to_string(layers) + " MoE layers x " +
                        std::to_string(experts) + ")",
                    {.code = "BadOption"});
    std::vector<std::vector<bool>> gpu(layers, std::vector<bool>(experts, false));
    // Experts of one layer, most chosen first (ties to the lower index).
    auto ranked = [&](std::size_t layer) {
        std::vector<std::size_t> order(experts);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](std::size_t x, std::size_t y) { return a.counts[layer][x] > a.counts[layer][y]; });
        return order;
    };
    switch (strategy) {
        case PlacementStrategy::frequency: {
            std::vector<std::pair<std::size_t, std::size_t>> all;
            for (std::size_t l = 0; l < layers; ++l)
                for (std::size_t e = 0; e < experts; ++e) all.emplace_back(l, e);
            std::stable_sort(all.begin(), all.end(), [&](const auto& x, const auto& y) {
                return a.counts[x.first][x.second] > a.counts[y.first][y.second];
            });
            for (std::int64_t i = 0; i < gpu_experts; ++i) gpu[all[i].first][all[i].second] = true;
            break;
        }
        case PlacementStrategy::uniform:
            for (std::size_t l = 0; l < layers; ++l) {
                const auto share = static_cast<std::size_t>(gpu_experts / static_cast<std::int64_t>(layers) +
                                                            (static_cast<std::int64_t>(l) < gpu_experts % static_cast<std::int64_t>(layers)));
                const auto order = ranked(l);
                for (std::size_t i = 0; i < share; ++i) gpu[l][order[i]] = true;
            }
            break;
        case PlacementStrategy::front_loading: {
            std::int64_t left = gpu_experts;
            for (std::size_t l = 0; l < layers && left > 0; ++l) {
                const auto order = ranked(l);
                for (std::size_t i = 0; i < experts && left > 0; ++i, --left) gpu[l][order[i]] = true;
            }
            break;
        }
    }
    return gpu;
}

}  // namespace moequant
