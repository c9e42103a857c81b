#include "expert_input_squares.hpp"

#include <moequant/engine/expert_importance_statistics.hpp>
#include <moequant/error.hpp>
#include <moequant/freed_heap.hpp>
#include <moequant/parallel.hpp>


namespace moequant {

std::vector<ExpertStatistics> measure_expert_statistics(const CalibrationActivations& calibration, const ModelPlan& plan,
                                                        const MoeLayerPlan& layer, const Checkpoint& source,
                                                        const std::function<Tensor(const ExpertWeightSource&)>& load) {
    // Every expert on the tokens its router sends it, as ggml's MUL_MAT_ID hands them to
    // llama-imatrix; the routing is the one convert --calibrate measures by.
    std::vector<std::vector<std::int64_t>> rows = routed_rows(calibration, plan, layer, source);
    std::vector<ExpertStatistics> out(layer.experts.size());
    const std::int64_t hidden = calibration.layer_inputs(layer.layer).shape[1];
    parallel_for(0, layer.experts.size(), 1, [&](std::size_t first, std::size_t last) {
        for (std::size_t e = first; e < last; ++e) {
            const ExpertPlan& expert = layer.experts[e];
            ExpertStatistics& stats = out[e];
            stats.expert = expert.expert;
            const ExpertTokens tokens{.all = false, .rows = std::move(rows[static_cast<std::size_t>(expert.expert)])};
            if (tokens.rows.empty()) {  // no token: zero sums and counts, as llama-imatrix keeps them
                stats.inputs = ColumnSquares(hidden).take();
                stats.down_inputs = ColumnSquares(expert.weights[static_cast<int>(Projection::gate)].rows).take();
                continue;
            }
            auto matrix = [&](Projection p) {
                const ExpertWeightSource& s = expert.weights[static_cast<int>(p)];
                try {
                    return load(s);
                } catch (const Error& err) {
                    throw err.with_context({.tensor = s.tensor, .layer = layer.layer});
                }
            };
            stats.inputs = input_squares(calibration, layer.layer, tokens).take();
            const Tensor gate = matrix(Projection::gate), up = matrix(Projection::up);
            stats.down_inputs = down_input_squares(calibration, layer.layer, tokens, gate, up, plan.expert_activation).take();
            return_freed_heap();
        }
    });
    return out;
}

}  // namespace moequant
