// GPTQ on one MoE layer from recorded inputs (gptq-compressed-tensors.md §5.3). By default all
// experts see all tokens: the layer's inputs X give one gate/up Hessian, prepared (Cholesky
// inverse) once for every expert. With routed-only calibration each expert's gate/up Hessian
// comes from the tokens its router sends it (expert_tokens.hpp). Each expert's down_proj
// Hessian comes from its own intermediate activations act(gate x) * up x over its tokens,
// computed here with the unquantized gate/up weights in the reference's BF16 steps.
//
// With threadpool parts (a kt output's), each part is quantized on its own on the inputs it
// sees: a gate or up part (rows) on the whole input, a down part (columns) on its columns'
// block of the Hessian; GPTQ's error feedback then stays within the part, as the runtime's
// products do.
#pragma once

#include "expert_tokens.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/engine/calibration_activations.hpp>
#include <moequant/engine/progress.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/output_format.hpp>
#include <moequant/quantizer.hpp>

#include <cstdint>
#include <functional>

namespace moequant {

// Tokens per step of an expert's Hessians (its inputs read, its products run, a chunk at a time).
inline constexpr std::int64_t calibration_chunk_tokens = 1024;

struct CalibratedLayerJob {
    // The quantizer: each matrix goes through the calibration facet of quantizer_for(its role)
    // (MOE_INT8 packs gate/up and down blocks differently), or its importance facet
    // (importance_layer.hpp).
    const Quantizer* quantizer = nullptr;
    const CalibrationActivations* calibration = nullptr;
    const ModelPlan* plan = nullptr;
    const Checkpoint* source = nullptr;         // for the router's tensors (routed-only)
    // Loads an expert matrix as BF16 [out, in] (checked for NaN/Inf by the caller's rules).
    std::function<Tensor(const ExpertWeightSource&)> load;
    // Loads it as its float32 decode, for an importance-weighted quantizer that takes it
    // (Quantizer::takes_float32_source()); null: the BF16 matrix is quantized.
    std::function<Tensor(const ExpertWeightSource&)> load_float32;
    ProgressSink* progress = nullptr;
    int parts = 1;  // threadpool parts of every matrix (split_expert_part)
    // Which of layer.experts (by index) this process quantizes; null: all of them. Across ranks
    // each takes its share, on the same inputs, and the others receive its results.
    std::function<bool(std::size_t)> owns;
};

// Returns how many calibration tokens each expert was quantized on.
LayerCoverage quantize_calibrated_layer(const CalibratedLayerJob& job, const MoeLayerPlan& layer, LayerSink& sink);

// The Hessian of the inputs an expert's gate and up projections see.
Tensor expert_input_hessian(const CalibrationActivations& calibration, std::int64_t layer, const ExpertTokens& tokens);

// Calls `body` with consecutive chunks of one expert's down_proj inputs act(gate x, up x) over
// its tokens x, as the model computes them (BF16 steps).
void for_each_down_input_chunk(const CalibrationActivations& calibration, std::int64_t layer, const ExpertTokens& tokens,
                               const Tensor& gate, const Tensor& up, const GatedActivation& activation,
                               const std::function<void(const InputRows&)>& body);

// The Hessian of one expert's down_proj inputs act(gate x, up x) over its tokens x.
Tensor down_proj_hessian(const CalibrationActivations& calibration, std::int64_t layer, const ExpertTokens& tokens,
                         const Tensor& gate, const Tensor& up, const GatedActivation& activation);

// The Hessian of part `part` of `parts` of a down_proj whose whole Hessian is `down_hessian`.
Tensor down_part_hessian(const Tensor& down_hessian, int part, int parts);

}  // namespace moequant
