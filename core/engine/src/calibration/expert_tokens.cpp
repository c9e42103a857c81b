#include "expert_tokens.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/layer_ops.hpp>
#include <moequant/parallel.hpp>
#include <moequant/router.hpp>

#include <algorithm>
#include <cstring>
#include <map>

namespace moequant {

namespace {

constexpr std::int64_t routing_chunk = 512;  // tokens routed per task

// A router tensor as F32 (decoded by its encoding, as the calibration forward reads it),
// checked against the shape the plan implies.
std::vector<float> router_tensor(const Checkpoint& source, const std::string& name, const Shape& shape,
                                 const std::string& what, bool read) {
    const EncodedWeight& w = source.weight(name);
    if (w.shape != shape)
        throw Error(ErrorKind::input, "the " + what + " has shape " + shape_to_string(w.shape) + ", expected " + shape_to_string(shape),
                    {.file = (source.directory() / source.shard_of(w.primary())).string(), .tensor = name, .code = "BadRouter"});
    if (!read) return {};
    return load_f32(source, name, shape);
}

// Rows [t0, t0 + n) of the layer inputs as F32.
void read_rows(const TensorView& x, std::int64_t t0, std::int64_t n, float* out) {
    const std::int64_t h = x.shape[1];
    if (x.dtype == DType::F32)
        std::memcpy(out, x.data() + t0 * h * 4, static_cast<std::size_t>(n * h * 4));
    else
        convert_bf16_to_f32(x.data() + t0 * h * 2, out, static_cast<std::size_t>(n * h));
}

struct RouterTensors {
    std::vector<float> weight, bias;
};

// The layer's router tensors, read when `read` (else only checked).
RouterTensors router_tensors(const ModelPlan& plan, const MoeLayerPlan& layer, const Checkpoint& source, bool read) {
    const std::string where = "layer " + std::to_string(layer.layer);
    if (layer.router_weight.empty())
        throw Error(ErrorKind::input, where + " has no router weight in its plan (none in the checkpoint, or a router the family's "
                              "adapter does not model); routed-only calibration needs it",
                    {.file = source.directory().string(), .code = "MissingTensor"});
    if (plan.router.uses_bias && layer.router_bias.empty())
        throw Error(ErrorKind::input,
                    where + " has no e_score_correction_bias in the checkpoint; its " +
                        describe_router(plan.router) + " router needs it",
                    {.file = source.directory().string(), .code = "MissingTensor"});
    route_tokens(plan.router, nullptr, 0, plan.num_experts, nullptr);  // the spec fits the layer
    RouterTensors t;
    t.weight = router_tensor(source, layer.router_weight, {plan.num_experts, plan.hidden_size}, "router weight", read);
    if (plan.router.uses_bias) t.bias = router_tensor(source, layer.router_bias, {plan.num_experts}, "router bias", read);
    return t;
}

}  // namespace

void check_routers(const ModelPlan& plan, const Checkpoint& source) {
    for (const auto& layer : plan.moe_layers) router_tensors(plan, layer, source, false);
}

void check_routing(const CalibrationActivations& calibration, const ModelPlan& plan, const Checkpoint& source) {
    if (calibration.routed_only()) check_routers(plan, source);
}

std::vector<std::vector<std::int64_t>> routed_rows(const CalibrationActivations& calibration, const ModelPlan& plan,
                                                   const MoeLayerPlan& layer, const Checkpoint& source) {
    const std::int64_t experts = plan.num_experts, hidden = plan.hidden_size;
    const RouterTensors router = router_tensors(plan, layer, source, true);
    const std::vector<float>& bias = router.bias;
    const Eigen::Map<const InputRows> weight(router.weight.data(), experts, hidden);

    // Chunks of the selected rows, routed in parallel; each chunk lists its tokens per expert.
    std::vector<std::pair<std::int64_t, std::int64_t>> chunks;
    for (const auto& [begin, end] : calibration.token_ranges())
        for (std::int64_t t = begin; t < end; t += routing_chunk) chunks.emplace_back(t, std::min(end, t + routing_chunk));
    std::vector<std::vector<std::vector<std::int64_t>>> routed(chunks.size());
    const TensorView x = calibration.layer_inputs(layer.layer);
    parallel_for(0, chunks.size(), 1, [&](std::size_t first, std::size_t last) {
        for (std::size_t c = first; c < last; ++c) {
            const auto [begin, end] = chunks[c];
            InputRows rows(end - begin, hidden);
            read_rows(x, begin, end - begin, rows.data());
            const InputRows logits = rows * weight.transpose();
            const Routing r = route_tokens(plan.router, logits.data(), end - begin, experts, bias.data());
            routed[c].resize(static_cast<std::size_t>(experts));
            for (std::int64_t t = 0; t < r.tokens; ++t)
                for (std::int64_t k = 0; k < r.top_k; ++k) routed[c][r.experts[t * r.top_k + k]].push_back(begin + t);
        }
    });
    std::vector<std::vector<std::int64_t>> rows(static_cast<std::size_t>(experts));
    for (std::int64_t e = 0; e < experts; ++e)
        for (const auto& chunk : routed) rows[e].insert(rows[e].end(), chunk[e].begin(), chunk[e].end());
    return rows;
}

std::vector<ExpertTokens> expert_tokens(const CalibrationActivations& calibration, const ModelPlan& plan,
                                        const MoeLayerPlan& layer, const Checkpoint& source) {
    std::vector<ExpertTokens> tokens(layer.experts.size());
    if (!calibration.routed_only()) return tokens;
    std::vector<std::vector<std::int64_t>> rows = routed_rows(calibration, plan, layer, source);
    for (std::size_t i = 0; i < layer.experts.size(); ++i) {
        tokens[i].rows = std::move(rows[static_cast<std::size_t>(layer.experts[i].expert)]);
        tokens[i].all = tokens[i].rows.empty();  // no token routed: calibrate on all of them
    }
    return tokens;
}

LayerCoverage layer_coverage(const CalibrationActivations& calibration, const MoeLayerPlan& layer,
                             const std::vector<ExpertTokens>& tokens) {
    LayerCoverage c;
    for (const auto& [begin, end] : calibration.token_ranges()) c.tokens += end - begin;
    c.routed_only = calibration.routed_only();
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        const std::int64_t expert = layer.experts[i].expert;
        c.experts.push_back(expert);
        c.tokens_per_expert.push_back(tokens[i].all ? c.tokens : static_cast<std::int64_t>(tokens[i].rows.size()));
        if (c.routed_only && tokens[i].all) c.fallback_experts.push_back(expert);
    }
    return c;
}

std::string fallback_sentence(const LayerCoverage& coverage) {
    constexpr std::size_t named = 16;  // a long list is cut; the manifest has all of them
    const auto& ids = coverage.fallback_experts;
    std::string list;
    for (std::size_t i = 0; i < std::min(ids.size(), named); ++i) list += (i ? ", " : "") + std::to_string(ids[i]);
    if (ids.size() > named) list += ", ...";
    return std::to_string(ids.size()) + " expert(s) (" + list + ") got no routed token and are calibrated on all tokens";
}

void for_each_input_chunk(const CalibrationActivations& calibration, std::int64_t layer, const ExpertTokens& tokens,
                          std::int64_t chunk, const std::function<void(const InputRows&)>& body) {
    const TensorView x = calibration.layer_inputs(layer);
    const std::int64_t hidden = x.shape[1];
    // One buffer for every chunk: a fresh one (29 MB at DeepSeek-V3's size) was faulted in anew
    // each time, a sixth of the down_proj step on one thread.
    InputRows rows;
    if (tokens.all) {
        for (const auto& [begin, end] : calibration.token_ranges())
            for (std::int64_t t0 = begin; t0 < end; t0 += chunk) {
                rows.resize(std::min(chunk, end - t0), hidden);
                read_rows(x, t0, rows.rows(), rows.data());
                body(rows);
            }
        return;
    }
    for (std::size_t i = 0; i < tokens.rows.size(); i += static_cast<std::size_t>(chunk)) {
        const std::size_t n = std::min(tokens.rows.size() - i, static_cast<std::size_t>(chunk));
        rows.resize(static_cast<Eigen::Index>(n), hidden);
        for (std::size_t r = 0; r < n; ++r) read_rows(x, tokens.rows[i + r], 1, rows.data() + r * hidden);
        body(rows);
    }
}

}  // namespace moequant
