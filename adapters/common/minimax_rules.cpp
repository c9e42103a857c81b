#include "minimax_rules.hpp"

#include <moequant/error.hpp>

namespace moequant::adapters {
namespace {

// No norm_topk_prob or expert groups exist in MiniMax configs: the top-k scores are always
// renormalized. M3 scales the routed output by routed_scaling_factor; M2's config has none (x1).
RouterSpec minimax_router(const ModelConfig& config, std::int64_t top_k) {
    const std::string scoring = config.string_or("scoring_func", "sigmoid");
    if (scoring != "sigmoid")
        throw Error(ErrorKind::input, "scoring_func '" + scoring + "' is not supported for MiniMax models (sigmoid)",
                    {.file = config.source(), .code = "InvalidConfig"});
    RouterSpec r = biased_sigmoid_router(top_k);  // the gate weight is F32 and x is cast to F32
    r.uses_bias = config_flag(config, "use_routing_bias", true);
    if (auto s = config.find("routed_scaling_factor"); s && !s->is_null()) r.scaling = s->as_double();
    return r;
}

}  // namespace

bool config_flag(const ModelConfig& config, const char* key, bool fallback) {
    auto v = config.find(key);
    return v && !v->is_null() ? v->as_bool() : fallback;
}

FamilyRules minimax_family_rules(std::string description, std::vector<std::string> model_types,
                                 std::vector<std::string> architectures) {
    FamilyRules r = family_rules(std::move(description), std::move(model_types), std::move(architectures), mixtral_expert_keys());
    r.router = &minimax_router;
    r.router_weights = {"block_sparse_moe.gate.weight"};
    r.router_bias = "block_sparse_moe.e_score_correction_bias";
    // The release's chat template for plain turns: "]~!b[" once, then "]~b]<role>\n" content
    // "[e~[\n" per turn, the assistant's role named "ai" (checked against MiniMax's published
    // format description and three independent renderings, docs/families.md). Not modelled: the
    // default system prompt the template inserts when there is none, tools, <think> handling.
    r.chat = [](const ModelConfig&) {
        return ChatTemplate{.begin = "]~!b[", .system = {"]~b]system\n", "[e~[\n"}, .user = {"]~b]user\n", "[e~[\n"},
                            .assistant = {"]~b]ai\n", "[e~[\n"}};
    };
    r.namings = {{"block_sparse_moe.experts", {"w1", "w3", "w2"}}};
    return r;
}

std::int64_t partial_rotary_dim(const ModelConfig& config, std::int64_t head_dim) {
    std::int64_t rotary_dim = head_dim;
    if (auto v = config.find("rotary_dim"); v && !v->is_null()) rotary_dim = v->as_int();
    else if (auto f = config.find("partial_rotary_factor"); f && !f->is_null())
        rotary_dim = static_cast<std::int64_t>(static_cast<double>(head_dim) * f->as_double());
    if (rotary_dim <= 0 || rotary_dim > head_dim || rotary_dim % 2 != 0)
        throw Error(ErrorKind::input,
                    "rotary_dim " + std::to_string(rotary_dim) + " does not fit head_dim " + std::to_string(head_dim) +
                        " (even, 1..head_dim)",
                    {.file = config.source(), .code = "InvalidConfig"});
    return rotary_dim;
}

}  // namespace moequant::adapters
