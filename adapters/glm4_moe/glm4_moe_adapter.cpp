// GLM-4.5 / GLM-4.5-Air / GLM-4.6 / GLM-4.7 (model-families.md §5.5, model-families-2026.md
// §3.3): DeepSeek-style MoE (first_k_dense_replace dense layers, n_routed_experts, one shared
// expert, sigmoid router with e_score_correction_bias), GQA attention with q/k/v biases,
// optional q/k norm and partial RoPE, an MTP layer at index num_hidden_layers.

#include "gqa_decoder.hpp"
#include "rule_based_adapter.hpp"
#include "synth/synth_blocks.hpp"
#include "synth/synth_side_files.hpp"

#include <moequant/plugin.hpp>

#include <boost/json.hpp>

namespace {

using namespace moequant;
using namespace moequant::adapters;
namespace json = boost::json;

FamilyRules glm4_moe_rules() {
    FamilyRules r;
    r.id = "glm4_moe";
    r.description = "GLM-4.5/4.5-Air/4.6/4.7: dense first layers, shared expert, biased GQA, MTP layer";
    r.model_types = {"glm4_moe"};
    r.architectures = {"Glm4MoeForCausalLM"};
    r.expert_count_keys = {"n_routed_experts"};
    r.expert_size_keys = {"moe_intermediate_size"};
    r.is_moe_layer = &moe_from_first_k_dense;
    // HF Glm4MoeConfig defaults: n_group 1, topk_group 1, routed_scaling_factor 1.0.
    r.router = [](const ModelConfig& c, std::int64_t k) { return noaux_tc_router(c, k, {1, 1, 1.0}); };
    r.chat = [](const ModelConfig&) { return glm_chat_template(); };
    r.namings = {{"mlp.experts", {"gate_proj", "up_proj", "down_proj"}}};
    return r;
}

// tiny has GLM-4.5-Air's settings (no q/k norm, routed_scaling_factor 1.0); small has those of
// the full-size GLM-4.5/4.6/4.7 (use_qk_norm true, 2.5, a longer context, model-families-2026.md
// §3.3, checked against a published GLM-4.7 config copy: docs/families.md).
struct Preset {
    std::int64_t hidden, intermediate, expert_intermediate, layers, first_dense, experts, top_k, heads, kv_heads,
        head_dim, vocab;
    bool qk_norm;
    double routed_scaling;
    std::int64_t max_positions;
};
constexpr Preset tiny{256, 320, 256, 3, 1, 8, 2, 4, 2, 64, 512, false, 1.0, 131072};
constexpr Preset small{512, 704, 512, 5, 2, 16, 4, 8, 2, 64, 1024, true, 2.5, 202752};

class Glm4MoeAdapter final : public RuleBasedAdapter {
public:
    Glm4MoeAdapter() : RuleBasedAdapter(glm4_moe_rules()) {}

    // GLM-4.5 (model-families.md §5.5): GQA with q/k/v biases, optional q/k norm (use_qk_norm),
    // rotate-half RoPE on the first partial_rotary_factor of each head, DeepSeek's sigmoid router,
    // n_shared_experts shared experts, dense first layers.
    std::unique_ptr<DecoderForward> decoder_forward(const ModelConfig& config, const Checkpoint& checkpoint,
                                                    const ModelPlan& plan) const override {
        auto flag = [&](const char* key, bool fallback) {
            auto v = config.find(key);
            return v && !v->is_null() ? v->as_bool() : fallback;
        };
        GqaAttentionSpec attention = gqa_attention_from_config(config);
        attention.bias = flag("attention_bias", true);
        attention.qk_norm = flag("use_qk_norm", false);
        double partial = 0.5;
        if (auto v = config.find("partial_rotary_factor"); v && !v->is_null()) partial = v->as_double();
        attention.rotary_dim = static_cast<std::int64_t>(static_cast<double>(attention.head_dim) * partial);
        DecoderSpec spec = decoder_spec_from_config(config, checkpoint);
        spec.shared_experts = "mlp.shared_experts.";
        spec.shared_intermediate = plan.expert_intermediate_size * config.int_or("n_shared_experts", 1);
        return make_gqa_decoder(std::move(spec), attention, checkpoint, plan);
    }

    void synthesize(const std::filesystem::path& directory, const Options& options) const override {
        const SynthSettings s = read_synth_settings(options, rules().model_types, {"per-expert"});
        const Preset p = s.small ? small : tiny;

        const SynthTokenizer tokenizer = glm_style_tokenizer(p.vocab);

        SynthModel model;
        model.encoding = s.encoding;
        model.config = config(p, s, tokenizer);
        add_tokenizer_files(model, tokenizer);
        auto& t = model.tensors;
        const std::int64_t H = p.hidden;
        const std::array<std::string, 3> proj{"gate_proj", "up_proj", "down_proj"};
        t.push_back(embedding_weight("model.embed_tokens.weight", tokenizer.vocab_size, H));
        for (std::int64_t layer = 0; layer <= p.layers; ++layer) {  // the last one is the MTP layer
            const std::string l = "model.layers." + std::to_string(layer) + ".";
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
        }
        t.push_back(norm_weight("model.norm.weight", H));
        t.push_back(bf16_tensor("lm_head.weight", {tokenizer.vocab_size, H}));

        model.shard_count = s.small ? 5 : 4;
        model.shard_name = [](std::size_t n, std::size_t c) { return padded_shard_name(n, c, 5, 5); };
        write_synth_model(model, directory, s);
    }

private:
    static json::value config(const Preset& p, const SynthSettings& s, const SynthTokenizer& tokenizer) {
        json::object c = base_config(tokenizer.vocab_size, tokenizer.bos_token_id, tokenizer.eos_token_id, s.encoding);
        c["architectures"] = json::array{"Glm4MoeForCausalLM"};
        c["attention_bias"] = true;
        c["first_k_dense_replace"] = p.first_dense;
        c["head_dim"] = p.head_dim;
        c["hidden_size"] = p.hidden;
        c["intermediate_size"] = p.intermediate;
        c["max_position_embeddings"] = p.max_positions;
        c["model_type"] = "glm4_moe";
        c["moe_intermediate_size"] = p.expert_intermediate;
        c["n_group"] = 1;
        c["n_routed_experts"] = p.experts;
        c["n_shared_experts"] = 1;
        c["norm_topk_prob"] = true;
        c["num_attention_heads"] = p.heads;
        c["num_experts_per_tok"] = p.top_k;
        c["num_hidden_layers"] = p.layers;
        c["num_key_value_heads"] = p.kv_heads;
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

MOEQUANT_PLUGIN("glm4_moe", "0.1.0", MOEQUANT_KIND_ADAPTER, "GLM-4.5/4.5-Air/4.6/4.7 family adapter") {
    registrar.add(std::make_unique<Glm4MoeAdapter>());
}
