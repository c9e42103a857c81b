// Qwen3-MoE, e.g. Qwen3-30B-A3B / 235B-A22B (model-families.md §5.4): `mlp.experts.E.*_proj`,
// `num_experts`, MoE layers by decoder_sparse_step / mlp_only_layers, q/k norms, no shared
// expert. Also its multimodal sibling Qwen3-VL-MoE (`qwen3_vl_moe`, settings under
// text_config), which stores experts fused in layout B under `model.language_model.layers.`.

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

FamilyRules qwen3_moe_rules() {
    FamilyRules r;
    r.id = "qwen3_moe";
    r.description = "Qwen3-MoE (30B-A3B, 235B-A22B) and Qwen3-VL-MoE (fused layout B, text_config)";
    r.model_types = {"qwen3_moe", "qwen3_vl_moe", "qwen3_vl_moe_text"};
    r.architectures = {"Qwen3MoeForCausalLM", "Qwen3VLMoeForConditionalGeneration"};
    r.expert_count_keys = {"num_experts"};
    r.expert_size_keys = {"moe_intermediate_size"};
    r.is_moe_layer = &moe_from_sparse_step;
    // HF Qwen3MoeConfig: norm_topk_prob defaults to false.
    r.router = [](const ModelConfig& c, std::int64_t k) { return softmax_router(c, k, false); };
    r.chat = [](const ModelConfig&) { return chatml_template(); };
    r.namings = {{"mlp.experts", {"gate_proj", "up_proj", "down_proj"}}};
    return r;
}

struct Preset {
    std::int64_t hidden, intermediate, expert_intermediate, layers, experts, top_k, heads, kv_heads, head_dim, vocab;
};
constexpr Preset tiny{256, 512, 256, 2, 8, 2, 4, 2, 64, 512};
constexpr Preset small{512, 1024, 512, 4, 16, 4, 8, 4, 64, 1024};

class Qwen3MoeAdapter final : public RuleBasedAdapter {
public:
    Qwen3MoeAdapter() : RuleBasedAdapter(qwen3_moe_rules()) {}

    // Qwen3-MoE (model-families.md §5.4): GQA with q/k RMSNorm over head_dim, full rotate-half
    // RoPE, plain RMSNorm, softmax router, no shared expert.
    std::unique_ptr<DecoderForward> decoder_forward(const ModelConfig& config, const Checkpoint& checkpoint,
                                                    const ModelPlan& plan) const override {
        GqaAttentionSpec attention = gqa_attention_from_config(config);
        attention.qk_norm = true;
        attention.bias = config.find("attention_bias") && config.find("attention_bias")->as_bool();
        return make_gqa_decoder(decoder_spec_from_config(config, checkpoint), attention, checkpoint, plan);
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

        SynthModel model;
        model.encoding = s.encoding;
        model.config = config(p, s, vl, tokenizer);
        add_tokenizer_files(model, tokenizer);
        auto& t = model.tensors;
        const std::int64_t H = p.hidden;
        const std::string root = vl ? "model.language_model." : "model.";
        if (vl) {  // a token vision tower: copied unchanged by every format
            t.push_back(bf16_tensor("model.visual.patch_embed.proj.weight", {H, 3, 2, 16, 16}));
            t.push_back(norm_weight("model.visual.merger.norm.weight", H));
        }
        t.push_back(embedding_weight(root + "embed_tokens.weight", tokenizer.vocab_size, H));
        for (std::int64_t layer = 0; layer < p.layers; ++layer) {
            const std::string l = root + "layers." + std::to_string(layer) + ".";
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
        }
        t.push_back(norm_weight(root + "norm.weight", H));
        t.push_back(bf16_tensor("lm_head.weight", {tokenizer.vocab_size, H}));

        model.shard_count = s.small ? 4 : 3;
        model.shard_name = [](std::size_t n, std::size_t c) { return padded_shard_name(n, c, 5, 5); };
        write_synth_model(model, directory, s);
    }

private:
    static json::value config(const Preset& p, const SynthSettings& s, bool vl, const SynthTokenizer& tokenizer) {
        json::object c = base_config(tokenizer.vocab_size, tokenizer.bos_token_id, tokenizer.eos_token_id, s.encoding);
        if (!vl) c["architectures"] = json::array{"Qwen3MoeForCausalLM"};
        c["attention_bias"] = false;
        c["decoder_sparse_step"] = 1;
        c["head_dim"] = p.head_dim;
        c["hidden_size"] = p.hidden;
        c["intermediate_size"] = p.intermediate;
        c["max_position_embeddings"] = 40960;
        c["mlp_only_layers"] = json::array{};
        c["model_type"] = vl ? "qwen3_vl_moe_text" : "qwen3_moe";
        c["moe_intermediate_size"] = p.expert_intermediate;
        c["norm_topk_prob"] = true;
        c["num_attention_heads"] = p.heads;
        c["num_experts"] = p.experts;
        c["num_experts_per_tok"] = p.top_k;
        c["num_hidden_layers"] = p.layers;
        c["num_key_value_heads"] = p.kv_heads;
        c["output_router_logits"] = false;
        c["rms_norm_eps"] = 1e-06;
        c["rope_theta"] = 1000000.0;
        c["router_aux_loss_coef"] = 0.001;
        c["use_sliding_window"] = false;
        if (!vl) return c;
        // Qwen3-VL-MoE nests the language model under text_config.
        json::object root;
        root["architectures"] = json::array{"Qwen3VLMoeForConditionalGeneration"};
        root["model_type"] = "qwen3_vl_moe";
        root["text_config"] = std::move(c);
        root["tie_word_embeddings"] = false;
        root["transformers_version"] = "4.57.1";
        root["vision_config"] = json::object{{"hidden_size", p.hidden}, {"model_type", "qwen3_vl_moe"}, {"patch_size", 16}};
        return root;
    }
};

}  // namespace

MOEQUANT_PLUGIN("qwen3_moe", "0.1.0", MOEQUANT_KIND_ADAPTER, "Qwen3-MoE and Qwen3-VL-MoE family adapter") {
    registrar.add(std::make_unique<Qwen3MoeAdapter>());
}
