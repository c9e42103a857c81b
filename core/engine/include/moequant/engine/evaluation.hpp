// `moequant eval`: the model's forward run twice on the same tokens, with the source's routed
// experts and with their quantized versions (QuantizedExperts), to the logits; what the
// quantization costs end to end. Layer by layer, the samples in batches of whole samples, both
// models' hidden states (float32, tokens x hidden) in memory or, under a budget, in mapped
// scratch files, as in sequential calibration.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/decoder_forward.hpp>
#include <moequant/engine/cluster.hpp>
#include <moequant/engine/progress.hpp>
#include <moequant/engine/quantized_experts.hpp>
#include <moequant/model_adapter.hpp>

#include <cstdint>
#include <filesystem>
#include <vector>

namespace moequant {

struct EvaluationJob {
    const DecoderForward* forward = nullptr;
    const Checkpoint* source = nullptr;
    const ModelPlan* plan = nullptr;
    std::vector<std::vector<std::int32_t>> samples;  // token ids per sample
    // The experts of the quantized model; null: the source's own (the two models are one, run once).
    const ReplacementExperts* quantized = nullptr;
    std::filesystem::path scratch;  // for the hidden states under a budget
    std::uint64_t max_memory = 0;   // bytes; 0 = no limit
    // The ranks sharing the run (cluster.hpp); null: this process alone. The sample blocks are
    // dealt to ranks, each running both models on its own; every rank gets the whole report.
    Cluster* cluster = nullptr;
};

struct LayerOutputError {
    std::int64_t layer = 0;
    // ||MoE_q(u) - MoE(u)|| / ||MoE(u)|| over all tokens: u is the source model's input to this
    // layer's MLP block, MoE(u) the whole block's output (router, routed and shared experts)
    // with the source's experts, MoE_q(u) with the quantized ones. Upstream drift excluded.
    double relative_output_error = 0;
    // Eval tokens the source model's router sent to each of the layer's experts (in the plan's
    // expert order): an expert with none had its quantization go unmeasured here.
    std::vector<std::int64_t> tokens_per_expert;
};

struct EvaluationReport {
    // exp(mean negative log-likelihood of the next token) over every position that has one.
    double perplexity_source = 0, perplexity_quantized = 0;
    // KL(source || quantized) of the next-token distributions, nats, mean and 99th percentile
    // (nearest rank) over the same positions.
    double kl_mean = 0, kl_p99 = 0;
    double top1_agreement = 0;  // fraction of positions whose most likely tokens agree
    std::int64_t tokens = 0;    // positions scored (each sample's tokens but its last)
    std::vector<LayerOutputError> layers;  // one per MoE layer, ascending
};

// Error(input) when no sample has two tokens.
EvaluationReport run_evaluation(const EvaluationJob& job, ProgressSink& progress);

}  // namespace moequant
