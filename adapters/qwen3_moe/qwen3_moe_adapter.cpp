// Qwen3-MoE, e.g. Qwen3-30B-A3B / 235B-A22B (model-families.md §5.4): `mlp.experts.E.*_proj`,
// `num_experts`, MoE layers by decoder_sparse_step / mlp_only_layers, q/k norms, no shared
// expert. Also its multimodal sibling Qwen3-VL-MoE (`qwen3_vl_moe`, settings under
// text_config), which stores experts fused in layout B under `model.language_model.layers.`.

#include "gqa_family_adapter.hpp"
#include "synth/family_checkpoint.hpp"
#include "synth/synth_blocks.hpp"

#include <moequant/plugin.hpp>

#include <boost/json.hpp>

namespace moequant::adapters {
namespace {

// Qwen's conventions throughout; HF Qwen3MoeConfig: norm_topk_prob defaults to false.
FamilyRules qwen3_moe_rules() {
    return qwen_family_rules("Qwen3-MoE (30B-A3B, 235B-A22B) and Qwen3-VL-MoE (fused layout B, text_config)",
                             {"qwen3_moe", "qwen3_vl_moe", "qwen3_vl_moe_text"},
                             {"Qwen3MoeForCausalLM", "Qwen3VLMoeForConditionalGeneration"}, false);
}

struct Preset : SynthSizes {
    std::int64_t intermediate;  // the dense MLP's (config.json only: every layer is MoE)
};
constexpr Preset tiny{{256, 2, 8, 2, 256, 4, 2, 64, 512}, 512};
constexpr Preset small{{512, 4, 16, 4, 512, 8, 4, 64, 1024}, 1024};

class Qwen3MoeAdapter final : public GqaFamilyAdapter {
public:
    Qwen3MoeAdapter() : GqaFamilyAdapter(qwen3_moe_rules()) {}

    // Qwen3-MoE (model-families.md §5.4): GQA with q/k RMSNorm over head_dim, full rotate-half
    // RoPE, plain RMSNorm, softmax router, no shared expert.
    void adjust_attention(const ModelConfig& config, GqaAttentionSpec& attention) const override {
        attention.qk_norm = true;
        attention.bias = config.find("attention_bias") && config.find("attention_bias")->as_bool();
    }

    void synthesize(const std::filesystem::path& directory, const Options& options) const override {
        Options o = options;
        if (o.get_string("model_type", "") == "qwen3_vl_moe_text") o.set("model_type", "qwen3_vl_moe");
        const SynthSettings s = read_synth_settings(o, {"qwen3_moe", "qwen3_vl_moe"}, {"per-expert", "fused-linear", "fused-bmm"});
        const bool vl = s.model_type == "qwen3_vl_moe";
        const std::string layout = vl ? "fused-bmm" : s.layout;  // Qwen3-VL-MoE ships layout B
        const bool fused = layout != "per-expert";
        if (fused && s.fp8) throw_usage_error("fused expert layouts are BF16 only");
        const Preset p = s.small ? small : tiny;

        const SynthTokenizer tokenizer = qwen_style_tokenizer(p.vocab);
        const std::int64_t H = p.hidden;
        FamilyCheckpoint checkpoint{.tokenizer = tokenizer, .config = config(p, s, vl, tokenizer), .hidden = H,
                                    .root = vl ? "model.language_model." : "model.", .layers = p.layers};
        if (vl)  // a token vision tower: copied unchanged by every format
            checkpoint.before_embedding = [&](std::vector<SynthTensor>& t) {
                t.push_back(bf16_tensor("model.visual.patch_embed.proj.weight", {H, 3, 2, 16, 16}));
                t.push_back(norm_weight("model.visual.merger.norm.weight", H));
            };
        checkpoint.layer = [&](std::vector<SynthTensor>& t, const std::string& l, std::int64_t) {
            t.push_back(norm_weight(l + "input_layernorm.weight", H));
            add_gqa_attention(t, l, {H, p.heads, p.kv_heads, p.head_dim, 0, false, true}, s.fp8);
            t.push_back(norm_weight(l + "post_attention_layernorm.weight", H));
            t.push_back(bf16_tensor(l + "mlp.gate.weight", {p.experts, H}));
            if (fused) {
                add_fused_experts(t, l, p.experts, p.expert_intermediate, H, layout == "fused-bmm");
            } else {
                for (std::int64_t e = 0; e < p.experts; ++e)
                    add_swiglu(t, l + "mlp.experts." + std::to_string(e) + ".", {"gate_proj", "up_proj", "down_proj"},
                               p.expert_intermediate, H, s.fp8);
            }
        };
        checkpoint.shard_count = s.small ? 4 : 3;
        write_family_checkpoint(checkpoint, directory, s);
    }

private:
    static json::value config(const Preset& p, const SynthSettings& s, bool vl, const SynthTokenizer& tokenizer) {
        // Qwen3-VL-MoE's text_config names no architecture.
        json::object c = family_config(tokenizer, s.encoding, p, qwen_expert_keys(),
                                       vl ? ConfigIdentity{"qwen3_vl_moe_text", ""} : ConfigIdentity{"qwen3_moe", "Qwen3MoeForCausalLM"});
        c["attention_bias"] = false;
        c["decoder_sparse_step"] = 1;
        c["intermediate_size"] = p.intermediate;
        c["max_position_embeddings"] = 40960;
        c["mlp_only_layers"] = json::array{};
        c["norm_topk_prob"] = true;
        c["output_router_logits"] = false;
        c["rms_norm_eps"] = 1e-06;
        c["rope_theta"] = 1000000.0;
        c["router_aux_loss_coef"] = 0.001;
        c["use_sliding_window"] = false;
        if (!vl) return c;
        // Qwen3-VL-MoE's interleaved M-RoPE: the release's sections [24, 20, 20] of head_dim 128's
        // 64 frequencies, scaled to this head (text positions are equal in every section, so the
        // rotation is plain RoPE's).
        const std::int64_t pairs = p.head_dim / 2, t = pairs * 24 / 64, h = (pairs - t) / 2;
        c["rope_scaling"] = json::object{
            {"mrope_interleaved", true}, {"mrope_section", json::array{t, h, pairs - t - h}}, {"rope_type", "default"}};
        // Qwen3-VL-MoE nests the language model under text_config.
        json::object root;
        root["architectures"] = json::array{"Qwen3VLMoeForConditionalGeneration"};
        root["model_type"] = "qwen3_vl_moe";
        root["text_config"] = std::move(c);
        root["tie_word_embeddings"] = false;
        root["transformers_version"] = "4.57.1";
        // deepstack_visual_indexes: the vision layers whose features are added to as many first
        // text layers (the release's three, fewer than the layers here; text tokens add nothing).
        json::array deepstack;
        for (std::int64_t i = 0; i < std::min<std::int64_t>(3, p.layers - 1); ++i) deepstack.push_back(8 * (i + 1));
        root["vision_config"] = json::object{{"deepstack_visual_indexes", std::move(deepstack)},
                                             {"hidden_size", p.hidden},
                                             {"model_type", "qwen3_vl_moe"},
                                             {"patch_size", 16}};
        return root;
    }
};

}  // namespace
}  // namespace moequant::adapters

MOEQUANT_PLUGIN("qwen3_moe", "0.1.0", MOEQUANT_KIND_ADAPTER, "Qwen3-MoE and Qwen3-VL-MoE family adapter") {
    registrar.add(std::make_unique<moequant::adapters::Qwen3MoeAdapter>());
}
