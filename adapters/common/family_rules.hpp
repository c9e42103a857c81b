// What distinguishes one MoE family from another on disk, as data.
//
// The first-party adapters share one plan builder (plan_builder.hpp) and one role classifier
// (tensor_roles.hpp); a family contributes only its FamilyRules: which model_type values it
// owns, which config keys hold its sizes, which layers carry routed experts, and how its expert
// tensors are named (model-families.md §1, §2).
#pragma once

#include <moequant/chat_template.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/model_config.hpp>
#include <moequant/router.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace moequant::adapters {

// How one family names its per-expert tensors, relative to a layer prefix such as
// "model.layers.3.": "<experts>.<E>.<projection>.weight".
struct ExpertNaming {
    std::string experts;                     // e.g. "mlp.experts", "block_sparse_moe.experts"
    std::array<std::string, 3> projections;  // gate, up, down, e.g. {"w1", "w3", "w2"}
};

// Where a family's config.json keeps its expert count and per-expert intermediate size.
struct ExpertSizeKeys {
    std::vector<std::string> count;  // e.g. {"n_routed_experts"}
    std::vector<std::string> size;   // e.g. {"moe_intermediate_size"}
};
// DeepSeek and GLM: n_routed_experts, moe_intermediate_size.
ExpertSizeKeys deepseek_expert_keys();
// Qwen: num_experts, moe_intermediate_size.
ExpertSizeKeys qwen_expert_keys();
// Mixtral, MiniMax and gpt-oss: num_local_experts, intermediate_size.
ExpertSizeKeys mixtral_expert_keys();

// Every layer (Mixtral): FamilyRules' default.
bool moe_every_layer(const ModelConfig& config, std::int64_t layer);

struct FamilyRules {
    std::string id;           // adapter id, e.g. "deepseek_v3"
    std::string description;  // one line for `moequant plugins`
    std::vector<std::string> model_types;    // model_type values owned (root or text_config)
    std::vector<std::string> architectures;  // architectures entries that confirm the family

    // Config keys, first present wins (looked up in text_config first, then the root).
    std::vector<std::string> expert_count_keys;  // e.g. {"n_routed_experts", "num_local_experts"}
    std::vector<std::string> expert_size_keys;   // e.g. {"moe_intermediate_size"}
    std::vector<std::string> top_k_keys = {"num_experts_per_tok"};

    // Whether decoder layer `layer` (< num_hidden_layers) carries routed experts.
    std::function<bool(const ModelConfig&, std::int64_t layer)> is_moe_layer = &moe_every_layer;

    // The router, from the config and the top-k (model-families.md §5).
    std::function<RouterSpec(const ModelConfig&, std::int64_t top_k)> router;
    // Router tensors relative to the layer prefix: the first weight name present wins; the
    // bias is looked up when the router uses one.
    std::vector<std::string> router_weights = {"mlp.gate.weight"};
    std::string router_bias = "mlp.gate.e_score_correction_bias";

    // The family's conversation format (a simplified form of its Jinja chat template).
    std::function<ChatTemplate(const ModelConfig&)> chat;

    // Accepted per-expert namings; the first is the family's canonical one. The default is
    // Hugging Face's "mlp.experts.<E>.{gate,up,down}_proj".
    std::vector<ExpertNaming> namings = {{"mlp.experts", {"gate_proj", "up_proj", "down_proj"}}};
    // Fused gate_up rows interleaved (row 2j gate j, row 2j+1 up j, gpt-oss) instead of gate
    // rows then up rows.
    bool interleaved_gate_up = false;
    // Set for a family whose routing the plan cannot express (it records no router, so
    // routed-only calibration refuses): the plan's last warning says why, and decoder_forward()
    // refuses with the hint instead of the default's (recorded activations could not be routed).
    struct UnmodelledRouting {
        std::string warning, forward_hint;
    };
    std::optional<UnmodelledRouting> unmodelled_routing;
    // Layer prefixes in which the decoder layers may sit (before "<L>.").
    std::vector<std::string> layer_prefixes = {"model.layers.", "model.language_model.layers.",
                                               "language_model.model.layers."};
    // Releases the family's synthesize() writes by name (ModelAdapter::synth_releases()).
    std::vector<SynthRelease> releases;
};

// The rules a family starts from: who it is and where its config sizes its experts; the rest
// keeps FamilyRules' defaults until the family sets it. The adapter id is the first model type
// (the family's canonical one).
FamilyRules family_rules(std::string description, std::vector<std::string> model_types,
                         std::vector<std::string> architectures, ExpertSizeKeys keys);

// Qwen's conventions: num_experts / moe_intermediate_size, MoE layers by decoder_sparse_step
// and mlp_only_layers, a softmax router renormalized when norm_topk_prob (default as the HF
// config class has it), ChatML.
FamilyRules qwen_family_rules(std::string description, std::vector<std::string> model_types,
                              std::vector<std::string> architectures, bool norm_topk_prob_default);

// The value of the first key of `keys` present in the config; Error(input) naming all of them
// when none is.
std::int64_t first_int(const ModelConfig& config, const std::vector<std::string>& keys);

// MoE-layer rules used by several families.
// DeepSeek / GLM: layer >= first_k_dense_replace and layer % moe_layer_freq == 0.
bool moe_from_first_k_dense(const ModelConfig& config, std::int64_t layer);
// Qwen: layer not in mlp_only_layers, num_experts > 0, (layer + 1) % decoder_sparse_step == 0.
bool moe_from_sparse_step(const ModelConfig& config, std::int64_t layer);
// Routers used by several families.
// Softmax over the experts, top-k, renormalized when norm_topk_prob (default `normalize`).
RouterSpec softmax_router(const ModelConfig& config, std::int64_t top_k, bool normalize);
// The same, always renormalized whatever norm_topk_prob says (Mixtral, gpt-oss).
RouterSpec renormalized_softmax_router(const ModelConfig& config, std::int64_t top_k);
// A sigmoid router choosing by score + e_score_correction_bias on F32 logits, renormalized,
// unscaled, one expert group: what DeepSeek's and MiniMax's routers start from.
RouterSpec biased_sigmoid_router(std::int64_t top_k);
// DeepSeek's "noaux_tc": sigmoid + e_score_correction_bias, group-limited (n_group,
// topk_group), norm_topk_prob, routed_scaling_factor; the defaults are the Hugging Face
// config classes' for the family. scoring_func "softmax" gives a softmax router instead.
struct NoauxDefaults {
    std::int64_t groups = 1, groups_kept = 1;
    double scaling = 1.0;
};
RouterSpec noaux_tc_router(const ModelConfig& config, std::int64_t top_k, NoauxDefaults defaults);

// ChatML (Qwen): "<|im_start|>role\ncontent<|im_end|>\n".
ChatTemplate chatml_template();
// GLM (GLM-4.5 and GLM-5): "[gMASK]<sop>" once, then "<|role|>\ncontent" with no end marker.
ChatTemplate glm_chat_template();

}  // namespace moequant::adapters
