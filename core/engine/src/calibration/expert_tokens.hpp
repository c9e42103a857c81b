// Which calibration tokens each routed expert of a layer sees (gptq-compressed-tensors.md
// §5.3): by default every selected token of the layer (moe_calibrate_all_experts); with
// routed-only calibration, the tokens the layer's router sends it. The reference leaves an
// expert no token reaches with H = 0, so GPTQ zeroes its whole weight; we calibrate such an
// expert on all of the layer's tokens instead (an expert unused on the calibration set may
// still be used at inference).
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/engine/calibration_activations.hpp>
#include <moequant/engine/run_manifest.hpp>
#include <moequant/model_adapter.hpp>

#include <Eigen/Core>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace moequant {

struct ExpertTokens {
    bool all = true;                 // every selected token of the layer
    std::vector<std::int64_t> rows;  // else: the rows of the layer's inputs routed to it, ascending
};

// With calibration.routed_only(): every MoE layer has its router tensors, with the shapes and
// dtypes the plan implies, and the plan's router fits the layer (Error(input) naming the
// tensor or setting). Reads no tensor data.
void check_routing(const CalibrationActivations& calibration, const ModelPlan& plan, const Checkpoint& source);
// The same check whatever the calibration mode.
void check_routers(const ModelPlan& plan, const Checkpoint& source);

// The rows of the layer's selected inputs each expert (by expert id) is routed to, ascending,
// whatever calibration.routed_only() says (Error(input) naming a missing or misshapen router
// tensor).
std::vector<std::vector<std::int64_t>> routed_rows(const CalibrationActivations& calibration, const ModelPlan& plan,
                                                   const MoeLayerPlan& layer, const Checkpoint& source);

// One entry per layer.experts[i]. All-tokens entries unless calibration.routed_only(), which
// reads the layer's router tensors from `source` (Error(input) naming a missing or misshapen
// one) and routes every selected token.
std::vector<ExpertTokens> expert_tokens(const CalibrationActivations& calibration, const ModelPlan& plan,
                                        const MoeLayerPlan& layer, const Checkpoint& source);

// How many tokens each of the layer's experts is calibrated on, and which fell back to all
// tokens although routing was asked for (none were routed to them).
LayerCoverage layer_coverage(const CalibrationActivations& calibration, const MoeLayerPlan& layer,
                             const std::vector<ExpertTokens>& tokens);
// "N expert(s) (ids a, b, ...) got no routed token and are calibrated on all tokens".
std::string fallback_sentence(const LayerCoverage& coverage);

using InputRows = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Calls `body` with consecutive chunks (at most `chunk` rows, F32) of the layer's inputs that
// `tokens` selects, in row order.
void for_each_input_chunk(const CalibrationActivations& calibration, std::int64_t layer, const ExpertTokens& tokens,
                          std::int64_t chunk, const std::function<void(const InputRows&)>& body);

}  // namespace moequant
