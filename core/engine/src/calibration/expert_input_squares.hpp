// The column statistics (column_squares.hpp) of what one routed expert's matrices see, measured
// the one way both `convert --calibrate --format gguf` (importance_layer) and `record --imatrix`
// (expert_importance_statistics) measure them.
#pragma once

#include "expert_tokens.hpp"

#include <moequant/engine/column_squares.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/tensor.hpp>

namespace moequant {

// What the expert's gate and up see: the layer's inputs over `tokens`.
ColumnSquares input_squares(const CalibrationActivations& calibration, std::int64_t layer, const ExpertTokens& tokens);
// What its down sees: act(gate x) * up x over `tokens`, in the model's BF16 steps.
ColumnSquares down_input_squares(const CalibrationActivations& calibration, std::int64_t layer, const ExpertTokens& tokens,
                                 const Tensor& gate, const Tensor& up, const GatedActivation& activation);

}  // namespace moequant
