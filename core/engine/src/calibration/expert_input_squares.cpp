#include "expert_input_squares.hpp"

#include "calibrated_layer.hpp"

#include <moequant/engine/profiler.hpp>

namespace moequant {

namespace {

constexpr std::int64_t chunk_tokens = 1024;  // rows read at a time

}  // namespace

ColumnSquares input_squares(const CalibrationActivations& calibration, std::int64_t layer, const ExpertTokens& tokens) {
    const ProfileSpan span("importance (gate/up)");
    ColumnSquares squares(calibration.layer_inputs(layer).shape[1]);
    for_each_input_chunk(calibration, layer, tokens, chunk_tokens, [&](const InputRows& rows) { squares.add(rows.data(), rows.rows()); });
    return squares;
}

ColumnSquares down_input_squares(const CalibrationActivations& calibration, std::int64_t layer, const ExpertTokens& tokens,
                                 const Tensor& gate, const Tensor& up, const GatedActivation& activation) {
    const ProfileSpan span("importance (down_proj)");
    ColumnSquares squares(gate.shape()[0]);
    for_each_down_input_chunk(calibration, layer, tokens, gate, up, activation,
                              [&](const InputRows& rows) { squares.add(rows.data(), rows.rows()); });
    return squares;
}

}  // namespace moequant
