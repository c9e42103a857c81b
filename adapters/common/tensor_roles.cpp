#include "tensor_roles.hpp"

#include <charconv>

namespace moequant::adapters {
namespace {

bool starts_with_any(std::string_view s, std::initializer_list<std::string_view> prefixes) {
    for (auto p : prefixes)
        if (s.starts_with(p)) return true;
    return false;
}

bool is_norm(std::string_view rest) {
    return rest.ends_with("norm.weight") || rest.ends_with("norm.bias");
}

// A name inside decoder layer `layer`.
TensorRole classify_layer_tensor(std::string_view rest, std::int64_t layer, const RoleContext& c) {
    if (layer >= c.num_hidden_layers) return TensorRole::skipped_mtp;
    if (is_norm(rest)) return TensorRole::norm;
    if (starts_with_any(rest, {"self_attn.", "linear_attn.", "attention.", "attn."})) return TensorRole::attention;
    if (rest.find("shared_expert_gate.") != std::string_view::npos) return TensorRole::shared_expert_gate;
    if (rest.find("shared_experts.") != std::string_view::npos || rest.find("shared_expert.") != std::string_view::npos)
        return TensorRole::shared_expert;
    if (rest.ends_with("e_score_correction_bias") || rest == "ffn.gate.bias") return TensorRole::router_bias;
    // DeepSeek-V4: `ffn.gate.weight`, its hash layers' token -> experts table `ffn.gate.tid2eid`.
    if (rest == "ffn.gate.weight" || rest == "ffn.gate.tid2eid") return TensorRole::router;
    if (rest == "mlp.gate.weight" || rest == "block_sparse_moe.gate.weight" || rest == "gate.weight" ||
        rest == "mlp.router.weight" || rest == "mlp.router.bias")
        return TensorRole::router;
    const bool moe = layer < static_cast<std::int64_t>(c.moe_layer.size()) && c.moe_layer[layer];
    if (!moe && (starts_with_any(rest, {"mlp.gate_proj.", "mlp.up_proj.", "mlp.down_proj."}) ||
                 starts_with_any(rest, {"feed_forward.w1.", "feed_forward.w2.", "feed_forward.w3."})))
        return TensorRole::dense_mlp;
    return TensorRole::other;
}

}  // namespace

std::optional<LayerName> split_layer_name(std::string_view name, const std::vector<std::string>& prefixes) {
    for (const auto& prefix : prefixes) {
        if (!name.starts_with(prefix)) continue;
        std::string_view tail = name.substr(prefix.size());
        std::int64_t layer = 0;
        auto [end, ec] = std::from_chars(tail.data(), tail.data() + tail.size(), layer);
        if (ec != std::errc() || end == tail.data() || end == tail.data() + tail.size() || *end != '.') continue;
        std::size_t digits = static_cast<std::size_t>(end - tail.data());
        return LayerName{std::string_view(name).substr(0, prefix.size()), layer, tail.substr(digits + 1)};
    }
    return std::nullopt;
}

TensorRole classify_tensor(std::string_view name, const RoleContext& context) {
    if (name.find("rotary_emb.inv_freq") != std::string_view::npos) return TensorRole::skipped_buffer;
    if (name.starts_with("mtp.") || name.starts_with("model.mtp.")) return TensorRole::skipped_mtp;
    if (auto split = split_layer_name(name, context.layer_prefixes))
        return classify_layer_tensor(split->rest, split->layer, context);
    // Outside the decoder layers: strip the model prefixes of plain and multimodal layouts.
    std::string_view global = name;
    for (std::string_view p : {"model.language_model.", "language_model.model.", "language_model.", "model."})
        if (global.starts_with(p)) {
            global.remove_prefix(p.size());
            break;
        }
    if (global.starts_with("mtp.")) return TensorRole::skipped_mtp;  // MiniMax-M3: language_model.model.mtp.
    if (global.starts_with("embed_tokens.") || global.starts_with("tok_embeddings.") || global == "embed.weight")
        return TensorRole::embedding;
    if (global.starts_with("lm_head.") || global == "output.weight" || global == "head.weight") return TensorRole::lm_head;
    if (global == "norm.weight" || global == "norm.bias") return TensorRole::norm;
    return TensorRole::other;
}

}  // namespace moequant::adapters
