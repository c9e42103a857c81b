// GLM-4.5 / GLM-4.5-Air / GLM-4.6 / GLM-4.7 (model-families.md §5.5, model-families-2026.md
// §3.3): DeepSeek-style MoE (first_k_dense_replace dense layers, n_routed_experts, one shared
// expert, sigmoid router with e_score_correction_bias), GQA attention with q/k/v biases,
// optional q/k norm and partial RoPE, an MTP layer at index num_hidden_layers.

#include "gqa_family_adapter.hpp"
#include "synth/family_checkpoint.hpp"
#include "synth/synth_blocks.hpp"

#include <moequant/plugin.hpp>

#include <boost/json.hpp>

namespace moequant::adapters {
namespace {

FamilyRules glm4_moe_rules() {
    FamilyRules r = family_rules("GLM-4.5/4.5-Air/4.6/4.7: dense first layers, shared expert, biased GQA, MTP layer",
                                 {"glm4_moe"}, {"Glm4MoeForCausalLM"}, deepseek_expert_keys());
    r.is_moe_layer = &moe_from_first_k_dense;
    // HF Glm4MoeConfig defaults: n_group 1, topk_group 1, routed_scaling_factor 1.0.
    r.router = [](const ModelConfig& c, std::int64_t k) { return noaux_tc_router(c, k, {1, 1, 1.0}); };
    r.chat = [](const ModelConfig&) { return glm_chat_template(); };
    return r;
}

// tiny has GLM-4.5-Air's settings (no q/k norm, routed_scaling_factor 1.0); small has those of
// the full-size GLM-4.5/4.6/4.7 (use_qk_norm true, 2.5, a longer context, model-families-2026.md
// §3.3, checked against a published GLM-4.7 config copy: docs/families.md).
struct Preset : SynthSizes {
    std::int64_t intermediate, first_dense;
    bool qk_norm;
    double routed_scaling;
    std::int64_t max_positions;
};
constexpr Preset tiny{{256, 3, 8, 2, 256, 4, 2, 64, 512}, 320, 1, false, 1.0, 131072};
constexpr Preset small{{512, 5, 16, 4, 512, 8, 2, 64, 1024}, 704, 2, true, 2.5, 202752};

class Glm4MoeAdapter final : public GqaFamilyAdapter {
public:
    Glm4MoeAdapter() : GqaFamilyAdapter(glm4_moe_rules()) {}

    // GLM-4.5 (model-families.md §5.5): GQA with q/k/v biases, optional q/k norm (use_qk_norm),
    // rotate-half RoPE on the first partial_rotary_factor of each head, DeepSeek's sigmoid router,
    // n_shared_experts shared experts, dense first layers.
    void adjust_attention(const ModelConfig& config, GqaAttentionSpec& attention) const override {
        auto flag = [&](const char* key, bool fallback) {
            auto v = config.find(key);
            return v && !v->is_null() ? v->as_bool() : fallback;
        };
        attention.bias = flag("attention_bias", true);
        attention.qk_norm = flag("use_qk_norm", false);
        double partial = 0.5;
        if (auto v = config.find("partial_rotary_factor"); v && !v->is_null()) partial = v->as_double();
        attention.rotary_dim = static_cast<std::int64_t>(static_cast<double>(attention.head_dim) * partial);
    }
    void adjust_decoder(const ModelConfig& config, const ModelPlan& plan, DecoderSpec& decoder) const override {
        decoder.shared_experts = "mlp.shared_experts.";
        decoder.shared_intermediate = plan.expert_intermediate_size * config.int_or("n_shared_experts", 1);
    }

    void synthesize(const std::filesystem::path& directory, const Options& options) const override {
        const SynthSettings s = read_synth_settings(options, rules().model_types, {"per-expert"});
        const Preset p = s.small ? small : tiny;

        const SynthTokenizer tokenizer = glm_style_tokenizer(p.vocab);
        const std::int64_t H = p.hidden;
        const std::array<std::string, 3> proj{"gate_proj", "up_proj", "down_proj"};
        FamilyCheckpoint checkpoint{.tokenizer = tokenizer, .config = config(p, s, tokenizer), .hidden = H,
                                    .layers = p.layers + 1};  // the last one is the MTP layer
        checkpoint.layer = [&](std::vector<SynthTensor>& t, const std::string& l, std::int64_t layer) {
            t.push_back(norm_weight(l + "input_layernorm.weight", H));
            add_gqa_attention(t, l, {H, p.heads, p.kv_heads, p.head_dim, 0, true, p.qk_norm}, s.fp8);
            t.push_back(norm_weight(l + "post_attention_layernorm.weight", H));
            if (layer < p.first_dense) {
                add_swiglu(t, l + "mlp.", proj, p.intermediate, H, s.fp8);
            } else {
                t.push_back(bf16_tensor(l + "mlp.gate.weight", {p.experts, H}));
                t.push_back({l + "mlp.gate.e_score_correction_bias", DType::F32, {p.experts}, SynthFill::normal, 0.01});
                for (std::int64_t e = 0; e < p.experts; ++e)
                    add_swiglu(t, l + "mlp.experts." + std::to_string(e) + ".", proj, p.expert_intermediate, H, s.fp8);
                add_swiglu(t, l + "mlp.shared_experts.", proj, p.expert_intermediate, H, s.fp8);
            }
            if (layer == p.layers) {
                t.push_back(norm_weight(l + "enorm.weight", H));
                t.push_back(norm_weight(l + "hnorm.weight", H));
                t.push_back(linear_weight(l + "eh_proj.weight", H, 2 * H, s.fp8));
                t.push_back(norm_weight(l + "shared_head.norm.weight", H));
            }
        };
        checkpoint.shard_count = s.small ? 5 : 4;
        write_family_checkpoint(checkpoint, directory, s);
    }

private:
    static json::value config(const Preset& p, const SynthSettings& s, const SynthTokenizer& tokenizer) {
        json::object c = family_config(tokenizer, s.encoding, p, deepseek_expert_keys(), {"glm4_moe", "Glm4MoeForCausalLM"});
        c["attention_bias"] = true;
        c["first_k_dense_replace"] = p.first_dense;
        c["intermediate_size"] = p.intermediate;
        c["max_position_embeddings"] = p.max_positions;
        c["n_group"] = 1;
        c["n_shared_experts"] = 1;
        c["norm_topk_prob"] = true;
        c["num_nextn_predict_layers"] = 1;
        c["partial_rotary_factor"] = 0.5;
        c["rms_norm_eps"] = 1e-05;
        c["rope_scaling"] = nullptr;
        c["rope_theta"] = 1000000.0;
        c["routed_scaling_factor"] = p.routed_scaling;
        c["topk_group"] = 1;
        c["use_qk_norm"] = p.qk_norm;
        return c;
    }
};

}  // namespace
}  // namespace moequant::adapters

MOEQUANT_PLUGIN("glm4_moe", "0.1.0", MOEQUANT_KIND_ADAPTER, "GLM-4.5/4.5-Air/4.6/4.7 family adapter") {
    registrar.add(std::make_unique<moequant::adapters::Glm4MoeAdapter>());
}
