#include "importance_layer.hpp"

#include "expert_input_squares.hpp"

#include <moequant/expert_matrix.hpp>
#include <moequant/engine/expert_parts.hpp>
#include <moequant/engine/profiler.hpp>
#include <moequant/error.hpp>
#include <moequant/freed_heap.hpp>
#include <moequant/parallel.hpp>


#include <algorithm>
#include <array>
#include <optional>
#include <span>

namespace moequant {

LayerCoverage quantize_importance_layer(const CalibratedLayerJob& job, const MoeLayerPlan& layer, LayerSink& sink) {
    std::array<const QuantizerImportance*, expert_projections.size()> facets{};
    std::array<bool, expert_projections.size()> float32{};  // the matrix's quantizer takes the float32 decode
    for (Projection p : expert_projections) {
        float32[static_cast<std::size_t>(p)] = job.load_float32 && job.quantizer->quantizer_for({layer.layer, p}).takes_float32_source();
        facets[static_cast<std::size_t>(p)] = job.quantizer->quantizer_for({layer.layer, p}).importance();
        if (!facets[static_cast<std::size_t>(p)])
            throw Error(ErrorKind::internal, std::string(job.quantizer->id()) + " has no importance facet for an expert matrix");
    }
    const std::vector<ExpertTokens> tokens = expert_tokens(*job.calibration, *job.plan, layer, *job.source);
    LayerCoverage coverage = layer_coverage(*job.calibration, layer, tokens);
    // An expert no routed token reaches is not measured on all tokens (as GPTQ's fallback is):
    // llama.cpp weighs its columns 1.
    std::vector<bool> unseen(tokens.size(), false);
    std::string unseen_ids;
    for (std::size_t e = 0; e < tokens.size(); ++e)
        if (std::find(coverage.fallback_experts.begin(), coverage.fallback_experts.end(), layer.experts[e].expert) !=
            coverage.fallback_experts.end()) {
            unseen[e] = true;
            coverage.tokens_per_expert[e] = 0;
            unseen_ids += (unseen_ids.empty() ? "" : ", ") + std::to_string(layer.experts[e].expert);
        }
    coverage.fallback_experts.clear();
    if (job.progress && !unseen_ids.empty())
        job.progress->note("layer " + std::to_string(layer.layer) + ": no calibration token was routed to expert(s) " + unseen_ids +
                           "; their columns weigh 1, as llama.cpp's importance matrix has it");
    auto owned = [&](std::size_t e) { return !job.owns || job.owns(e); };
    const std::int64_t hidden = layer.experts.front().weights[0].cols;
    // Experts that see all tokens share one measurement of the layer's inputs.
    std::optional<ColumnImportance> all_inputs;
    for (std::size_t e = 0; e < tokens.size() && !all_inputs; ++e)
        if (tokens[e].all && !unseen[e] && owned(e)) all_inputs = input_squares(*job.calibration, layer.layer, tokens[e]).mean();
    parallel_for(0, layer.experts.size(), 1, [&](std::size_t first, std::size_t last) {
        for (std::size_t e = first; e < last; ++e) {
            if (!owned(e)) continue;
            const ExpertPlan& expert = layer.experts[e];
            auto source = [&](Projection p) -> const ExpertWeightSource& { return expert.weights[static_cast<int>(p)]; };
            auto quantize = [&](Projection p, const Tensor& bf16, const ColumnImportance& importance) {
                try {
                    // The forward measured on the BF16 matrix; the quantizer may take the float32 decode.
                    const Tensor precise = float32[static_cast<std::size_t>(p)] ? job.load_float32(source(p)) : Tensor();
                    const Tensor& matrix = float32[static_cast<std::size_t>(p)] ? precise : bf16;
                    for (int part = 0; part < job.parts; ++part) {
                        const Tensor piece = job.parts == 1 ? Tensor() : split_expert_part(matrix, p, part, job.parts);
                        QuantizedTensor quantized = [&] {
                            const ProfileSpan span("quantize (importance)", source(p).tensor);
                            return facets[static_cast<std::size_t>(p)]->quantize_weighted(
                                job.parts == 1 ? matrix.view() : piece.view(), part_columns(importance.weights, p, part, job.parts));
                        }();
                        const ProfileSpan span("write");
                        sink.write({expert.expert, p, part, std::move(quantized)});
                    }
                } catch (const Error& err) {
                    throw err.with_context({.tensor = source(p).tensor, .layer = layer.layer});
                }
            };
            auto ones = [](std::int64_t cols) { return ColumnImportance{std::vector<float>(static_cast<std::size_t>(cols), 1.0f), 0}; };
            const Tensor gate = job.load(source(Projection::gate));
            const Tensor up = job.load(source(Projection::up));
            ColumnImportance inputs;
            if (unseen[e]) {
                inputs = ones(hidden);
            } else if (tokens[e].all) {
                inputs = *all_inputs;
            } else {
                inputs = input_squares(*job.calibration, layer.layer, tokens[e]).mean();
            }
            quantize(Projection::gate, gate, inputs);
            quantize(Projection::up, up, inputs);
            const Tensor down = job.load(source(Projection::down));
            const ColumnImportance down_inputs =
                unseen[e] ? ones(gate.shape()[0])
                          : down_input_squares(*job.calibration, layer.layer, tokens[e], gate, up, job.plan->expert_activation).mean();
            quantize(Projection::down, down, down_inputs);
            return_freed_heap();
        }
    });
    job.calibration->release_layer(layer.layer);
    return coverage;
}

}  // namespace moequant
