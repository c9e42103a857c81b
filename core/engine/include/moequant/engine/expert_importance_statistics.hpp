// llama-imatrix's statistics of one MoE layer's routed experts, measured on the layer's inputs
// as llama-imatrix collects them for the stacked expert tensors (ggml's MUL_MAT_ID): per expert,
// over the tokens its router sends it, each input column's sum of squares and sum, and the
// token count — the layer's inputs for gate and up, act(gate x) * up x for down. What `record
// --imatrix` writes as llama.cpp's importance matrix file, and (as mean squares) what `convert
// --calibrate --format gguf` weighs each expert by (docs/gguf-imatrix.md).
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/engine/calibration_activations.hpp>
#include <moequant/engine/column_squares.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/tensor.hpp>

#include <cstdint>
#include <functional>
#include <vector>

namespace moequant {

struct ExpertStatistics {
    std::int64_t expert = 0;       // the expert id
    ColumnStatistics inputs;       // gate and up see the same inputs
    ColumnStatistics down_inputs;  // act(gate x) * up x
};

// One entry per layer.experts[i]; an expert no token is routed to has 0 tokens and zero sums.
// `load` brings an expert matrix to BF16 [out, in] (the unquantized gate and up that down's
// inputs are computed with, in the model's BF16 steps). Error(input) naming a missing or
// misshapen router tensor.
std::vector<ExpertStatistics> measure_expert_statistics(const CalibrationActivations& calibration, const ModelPlan& plan,
                                                        const MoeLayerPlan& layer, const Checkpoint& source,
                                                        const std::function<Tensor(const ExpertWeightSource&)>& load);

}  // namespace moequant
