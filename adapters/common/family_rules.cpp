#include "family_rules.hpp"

#include <moequant/error.hpp>

#include <algorithm>

namespace moequant::adapters {

ExpertSizeKeys deepseek_expert_keys() { return {{"n_routed_experts"}, {"moe_intermediate_size"}}; }
ExpertSizeKeys qwen_expert_keys() { return {{"num_experts"}, {"moe_intermediate_size"}}; }
ExpertSizeKeys mixtral_expert_keys() { return {{"num_local_experts"}, {"intermediate_size"}}; }

FamilyRules family_rules(std::string description, std::vector<std::string> model_types,
                         std::vector<std::string> architectures, ExpertSizeKeys keys) {
    FamilyRules r;
    r.id = model_types.front();
    r.description = std::move(description);
    r.model_types = std::move(model_types);
    r.architectures = std::move(architectures);
    r.expert_count_keys = std::move(keys.count);
    r.expert_size_keys = std::move(keys.size);
    return r;
}

FamilyRules qwen_family_rules(std::string description, std::vector<std::string> model_types,
                              std::vector<std::string> architectures, bool norm_topk_prob_default) {
    FamilyRules r = family_rules(std::move(description), std::move(model_types), std::move(architectures), qwen_expert_keys());
    r.is_moe_layer = &moe_from_sparse_step;
    r.router = [norm_topk_prob_default](const ModelConfig& c, std::int64_t k) {
        return softmax_router(c, k, norm_topk_prob_default);
    };
    r.chat = [](const ModelConfig&) { return chatml_template(); };
    return r;
}

std::int64_t first_int(const ModelConfig& config, const std::vector<std::string>& keys) {
    for (const auto& key : keys)
        if (auto v = config.find(key); v && !v->is_null()) return v->as_int();
    std::string names;
    for (const auto& key : keys) names += (names.empty() ? "'" : ", '") + key + "'";
    throw Error(ErrorKind::input, "missing required key " + names,
                {.file = config.source(), .code = "InvalidConfig"});
}

bool moe_from_first_k_dense(const ModelConfig& config, std::int64_t layer) {
    std::int64_t first_dense = config.int_or("first_k_dense_replace", 0);
    std::int64_t frequency = std::max<std::int64_t>(1, config.int_or("moe_layer_freq", 1));
    return layer >= first_dense && layer % frequency == 0;
}

bool moe_from_sparse_step(const ModelConfig& config, std::int64_t layer) {
    if (config.int_or("num_experts", 0) <= 0) return false;
    if (auto only = config.find("mlp_only_layers"); only && only->is_array()) {
        auto layers = only->as_int_array();
        if (std::find(layers.begin(), layers.end(), layer) != layers.end()) return false;
    }
    std::int64_t step = std::max<std::int64_t>(1, config.int_or("decoder_sparse_step", 1));
    return (layer + 1) % step == 0;
}

bool moe_every_layer(const ModelConfig&, std::int64_t) { return true; }

namespace {

bool bool_or(const ModelConfig& config, std::string_view key, bool fallback) {
    auto v = config.find(key);
    return v && !v->is_null() ? v->as_bool() : fallback;
}

double double_or(const ModelConfig& config, std::string_view key, double fallback) {
    auto v = config.find(key);
    return v && !v->is_null() ? v->as_double() : fallback;
}

}  // namespace

ChatTemplate chatml_template() {
    return {.system = {"<|im_start|>system\n", "<|im_end|>\n"}, .user = {"<|im_start|>user\n", "<|im_end|>\n"},
            .assistant = {"<|im_start|>assistant\n", "<|im_end|>\n"}};
}

ChatTemplate glm_chat_template() {
    return {.begin = "[gMASK]<sop>", .system = {"<|system|>\n", ""}, .user = {"<|user|>\n", ""},
            .assistant = {"<|assistant|>\n", ""}};
}

RouterSpec softmax_router(const ModelConfig& config, std::int64_t top_k, bool normalize) {
    RouterSpec r;
    r.scoring = RouterScoring::softmax;
    r.top_k = top_k;
    r.normalize = bool_or(config, "norm_topk_prob", normalize);
    r.bf16_logits = true;  // gate(x) runs in the model dtype
    return r;
}

RouterSpec renormalized_softmax_router(const ModelConfig& config, std::int64_t top_k) {
    RouterSpec r = softmax_router(config, top_k, true);
    r.normalize = true;
    return r;
}

RouterSpec biased_sigmoid_router(std::int64_t top_k) {
    RouterSpec r;
    r.scoring = RouterScoring::sigmoid;
    r.top_k = top_k;
    r.normalize = true;
    r.scaling = 1.0;
    r.groups = 1;
    r.groups_kept = 1;
    r.bf16_logits = false;  // the router casts x and its weight to F32
    r.uses_bias = true;
    return r;
}

RouterSpec noaux_tc_router(const ModelConfig& config, std::int64_t top_k, NoauxDefaults defaults) {
    const std::string scoring = config.string_or("scoring_func", "sigmoid");
    if (scoring == "softmax") return softmax_router(config, top_k, bool_or(config, "norm_topk_prob", true));
    if (scoring != "sigmoid")
        throw Error(ErrorKind::input, "scoring_func '" + scoring + "' is not supported (sigmoid or softmax)",
                    {.file = config.source(), .code = "InvalidConfig"});
    RouterSpec r = biased_sigmoid_router(top_k);
    r.normalize = bool_or(config, "norm_topk_prob", true);
    r.scaling = double_or(config, "routed_scaling_factor", defaults.scaling);
    r.groups = config.int_or("n_group", defaults.groups);
    r.groups_kept = config.int_or("topk_group", defaults.groups_kept);
    return r;
}

}  // namespace moequant::adapters
