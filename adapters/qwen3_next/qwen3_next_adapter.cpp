// Qwen3-Next-80B-A3B (model-families.md §5.2): 512 routed experts, one shared expert with a
// scalar `shared_expert_gate`, Gated DeltaNet linear-attention layers with gated full attention
// every `full_attention_interval` layers, and top-level `mtp.*` tensors that are skipped.
//
// Qwen3.5-MoE (`qwen3_5_moe`, model-families-2026.md §3.6) is owned here too: its language model
// is Qwen3-Next's with the linear-attention projections stored apart, inside a VLM (text_config,
// `model.language_model.` names, `model.visual.*` copied unchanged as role other). Every layer
// is MoE and the router always renormalizes (its config has no key saying otherwise); the BF16
// release stores experts fused in layout A, the FP8 release per expert.

#include "qwen3_next_decoder.hpp"
#include "rule_based_adapter.hpp"
#include "synth/family_checkpoint.hpp"
#include "synth/synth_blocks.hpp"

#include <moequant/plugin.hpp>

#include <boost/json.hpp>

namespace moequant::adapters {
namespace {

FamilyRules qwen3_next_rules() {
    // HF Qwen3NextConfig: norm_topk_prob defaults to true.
    FamilyRules r = qwen_family_rules("Qwen3-Next and Qwen3.5-MoE: shared expert + gate, Gated DeltaNet layers, mtp.* skipped",
                                      {"qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text"},
                                      {"Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration"}, true);
    // Qwen3.5: every layer MoE, and its router always divides by the sum.
    r.is_moe_layer = [](const ModelConfig& c, std::int64_t layer) {
        return is_qwen3_5_moe(c) ? moe_every_layer(c, layer) : moe_from_sparse_step(c, layer);
    };
    r.router = [](const ModelConfig& c, std::int64_t k) {
        RouterSpec spec = softmax_router(c, k, true);
        if (is_qwen3_5_moe(c)) spec.normalize = true;
        return spec;
    };
    return r;
}

struct Preset : SynthSizes {
    std::int64_t intermediate, shared_intermediate, key_heads, value_heads, key_dim, value_dim;
};
constexpr Preset tiny{{256, 4, 8, 2, 256, 2, 1, 64, 512}, 512, 256, 2, 4, 32, 32};
constexpr Preset small{{512, 8, 16, 4, 512, 4, 2, 64, 1024}, 1024, 512, 4, 8, 32, 32};
constexpr std::int64_t full_attention_interval = 4, conv_kernel = 4;

// What differs between the two families' checkpoints.
struct Style {
    bool qwen3_5 = false;  // Qwen3.5: split linear-attention projections, VLM names and config
    bool fused = false;    // routed experts fused in layout A (Qwen3.5's BF16 release)
    bool fp8 = false;
};

class Qwen3NextAdapter final : public RuleBasedAdapter {
public:
    Qwen3NextAdapter() : RuleBasedAdapter(qwen3_next_rules()) {}

    std::unique_ptr<DecoderForward> decoder_forward(const ModelConfig& config, const Checkpoint& checkpoint,
                                                    const ModelPlan& plan) const override {
        return make_qwen3_next_decoder(config, checkpoint, plan);
    }

    void synthesize(const std::filesystem::path& directory, const Options& options) const override {
        // Qwen3.5's BF16 release is fused (layout A); its FP8 release and Qwen3-Next are per expert.
        const bool qwen3_5 = options.get_string("model_type", "") == "qwen3_5_moe";
        const bool bf16 = options.get_string("dtype", "bf16") == "bf16";
        if (qwen3_5 && !bf16 && options.get_string("layout", "per-expert") != "per-expert")
            throw_usage_error("fused expert layouts are BF16 only (Qwen3.5's FP8 release is per expert)");
        const std::vector<std::string> layouts =
            qwen3_5 && bf16 ? std::vector<std::string>{"fused-linear", "per-expert"} : std::vector<std::string>{"per-expert"};
        const SynthSettings s = read_synth_settings(options, {"qwen3_next", "qwen3_5_moe"}, layouts);
        const Preset p = s.small ? small : tiny;
        const Style style{qwen3_5, s.layout == "fused-linear", s.fp8};

        const SynthTokenizer tokenizer = qwen_style_tokenizer(p.vocab);

        const std::int64_t H = p.hidden;
        FamilyCheckpoint checkpoint{.tokenizer = tokenizer,
                                    .config = qwen3_5 ? vlm_config(config(p, s, style, tokenizer), p) : config(p, s, style, tokenizer),
                                    .hidden = H,
                                    .root = qwen3_5 ? "model.language_model." : "model.",
                                    .layers = p.layers};
        if (qwen3_5) checkpoint.before_embedding = [&](std::vector<SynthTensor>& t) { add_vision_tower(t, H); };
        checkpoint.layer = [&](std::vector<SynthTensor>& t, const std::string& l, std::int64_t layer) {
            add_layer(t, l, p, style, (layer + 1) % full_attention_interval == 0);
        };
        // The multi-token-prediction module: top level, one full-attention MoE layer.
        checkpoint.after_head = [&](std::vector<SynthTensor>& t) {
            t.push_back(linear_weight("mtp.fc.weight", H, 2 * H, s.fp8));
            t.push_back(norm_weight("mtp.pre_fc_norm_embedding.weight", H));
            t.push_back(norm_weight("mtp.pre_fc_norm_hidden.weight", H));
            add_layer(t, "mtp.layers.0.", p, style, /*full_attention=*/true);
            t.push_back(norm_weight("mtp.norm.weight", H));
        };
        checkpoint.shard_count = s.small ? 5 : 3;
        if (qwen3_5)  // Qwen3.5's releases: "model.safetensors-00001-of-00014.safetensors"
            checkpoint.shard_name = [](std::size_t n, std::size_t c) { return "model.safetensors" + padded_shard_name(n, c, 5, 5).substr(5); };
        write_family_checkpoint(checkpoint, directory, s);
    }

private:
    static void add_layer(std::vector<SynthTensor>& t, const std::string& l, const Preset& p, const Style& style, bool full) {
        const std::int64_t H = p.hidden;
        const bool fp8 = style.fp8;
        // Zero-centred RMSNorms: the stored weights sit near 0 (the layer multiplies by 1 + w).
        t.push_back(bf16_tensor(l + "input_layernorm.weight", {H}));
        if (full) {
            add_gqa_attention(t, l, {H, p.heads, p.kv_heads, p.head_dim, 2 * p.heads * p.head_dim, false, true}, fp8);
        } else {
            const std::string a = l + "linear_attn.";
            const std::int64_t qk = p.key_heads * p.key_dim, v = p.value_heads * p.value_dim;
            if (style.qwen3_5) {
                t.push_back(linear_weight(a + "in_proj_qkv.weight", 2 * qk + v, H, fp8));
                t.push_back(linear_weight(a + "in_proj_z.weight", v, H, fp8));
                t.push_back(linear_weight(a + "in_proj_b.weight", p.value_heads, H, fp8));
                t.push_back(linear_weight(a + "in_proj_a.weight", p.value_heads, H, fp8));
            } else {
                t.push_back(linear_weight(a + "in_proj_qkvz.weight", 2 * qk + 2 * v, H, fp8));
                t.push_back(linear_weight(a + "in_proj_ba.weight", 2 * p.value_heads, H, fp8));
            }
            t.push_back(bf16_tensor(a + "conv1d.weight", {2 * qk + v, 1, conv_kernel}));
            t.push_back({a + "dt_bias", DType::BF16, {p.value_heads}, SynthFill::ones, 0.1});
            t.push_back({a + "A_log", DType::BF16, {p.value_heads}, SynthFill::normal, 0.5});
            t.push_back(norm_weight(a + "norm.weight", p.value_dim));
            t.push_back(linear_weight(a + "out_proj.weight", H, v, fp8));
        }
        t.push_back(bf16_tensor(l + "post_attention_layernorm.weight", {H}));
        t.push_back(bf16_tensor(l + "mlp.gate.weight", {p.experts, H}));
        if (style.fused) {
            add_fused_experts(t, l, p.experts, p.expert_intermediate, H, /*layout_b=*/false);
        } else {
            for (std::int64_t e = 0; e < p.experts; ++e)
                add_swiglu(t, l + "mlp.experts." + std::to_string(e) + ".", {"gate_proj", "up_proj", "down_proj"},
                           p.expert_intermediate, H, fp8);
        }
        add_swiglu(t, l + "mlp.shared_expert.", {"gate_proj", "up_proj", "down_proj"}, p.shared_intermediate, H, fp8);
        t.push_back(bf16_tensor(l + "mlp.shared_expert_gate.weight", {1, H}));
    }

    // A token vision tower (Qwen3-VL's naming): not the language model's, copied unchanged.
    static void add_vision_tower(std::vector<SynthTensor>& t, std::int64_t hidden) {
        const std::int64_t V = 64;
        const std::string v = "model.visual.";
        t.push_back(bf16_tensor(v + "patch_embed.proj.weight", {V, 3, 2, 16, 16}));
        t.push_back(norm_weight(v + "blocks.0.norm1.weight", V));
        t.push_back(bf16_tensor(v + "blocks.0.attn.qkv.weight", {3 * V, V}));
        t.push_back(bf16_tensor(v + "blocks.0.attn.qkv.bias", {3 * V}));
        t.push_back(norm_weight(v + "merger.norm.weight", V));
        t.push_back(bf16_tensor(v + "merger.linear_fc2.weight", {hidden, 4 * V}));
    }

    static json::value config(const Preset& p, const SynthSettings& s, const Style& style, const SynthTokenizer& tokenizer) {
        // Qwen3.5's text_config names no architecture.
        json::object c = family_config(tokenizer, s.encoding, p, qwen_expert_keys(),
                                       style.qwen3_5 ? ConfigIdentity{"qwen3_5_moe_text", ""}
                                                     : ConfigIdentity{"qwen3_next", "Qwen3NextForCausalLM"});
        c["attention_bias"] = false;
        c["full_attention_interval"] = full_attention_interval;
        c["linear_conv_kernel_dim"] = conv_kernel;
        c["linear_key_head_dim"] = p.key_dim;
        c["linear_num_key_heads"] = p.key_heads;
        c["linear_num_value_heads"] = p.value_heads;
        c["linear_value_head_dim"] = p.value_dim;
        c["max_position_embeddings"] = 262144;
        c["output_router_logits"] = false;
        c["rms_norm_eps"] = 1e-06;
        c["router_aux_loss_coef"] = 0.001;
        c["shared_expert_intermediate_size"] = p.shared_intermediate;
        if (style.qwen3_5) {
            // Qwen3.5's text config: no norm_topk_prob / decoder_sparse_step / mlp_only_layers, rope
            // settings under rope_parameters, layer_types spelled out, an MTP layer count.
            c["attn_output_gate"] = true;
            json::array types;
            for (std::int64_t l = 0; l < p.layers; ++l)
                types.emplace_back((l + 1) % full_attention_interval == 0 ? "full_attention" : "linear_attention");
            c["layer_types"] = std::move(types);
            c["mtp_num_hidden_layers"] = 1;
            c["mtp_use_dedicated_embeddings"] = false;
            // mrope_section sums to rotary_dim / 2, as the release's [11, 11, 10] does for head_dim 256.
            c["rope_parameters"] = json::object{{"mrope_interleaved", true},
                                                {"mrope_section", json::array{3, 3, 2}},
                                                {"partial_rotary_factor", 0.25},
                                                {"rope_theta", 10000000},
                                                {"rope_type", "default"}};
            return c;
        }
        c["decoder_sparse_step"] = 1;
        c["intermediate_size"] = p.intermediate;
        c["mlp_only_layers"] = json::array{};
        c["norm_topk_prob"] = true;
        c["partial_rotary_factor"] = 0.25;
        c["rope_scaling"] = nullptr;
        c["rope_theta"] = 10000000.0;
        c["use_sliding_window"] = false;
        return c;
    }

    // Qwen3.5's config.json: the language model's settings in text_config, quantization_config
    // at the top beside vision_config.
    static json::value vlm_config(json::value text_value, const Preset& p) {
        json::object& text = text_value.as_object();
        json::object root{{"architectures", json::array{"Qwen3_5MoeForConditionalGeneration"}},
                          {"model_type", "qwen3_5_moe"},
                          {"tie_word_embeddings", false},
                          {"transformers_version", "4.57.0.dev0"},
                          {"vision_config", json::object{{"depth", 1},
                                                         {"hidden_size", 64},
                                                         {"model_type", "qwen3_5_moe"},
                                                         {"out_hidden_size", p.hidden},
                                                         {"patch_size", 16},
                                                         {"spatial_merge_size", 2},
                                                         {"temporal_patch_size", 2}}}};
        if (auto* q = text.if_contains("quantization_config")) {
            root["quantization_config"] = std::move(*q);
            text.erase("quantization_config");
        }
        root["text_config"] = std::move(text_value);
        return root;
    }
};

}  // namespace
}  // namespace moequant::adapters

MOEQUANT_PLUGIN("qwen3_next", "0.1.0", MOEQUANT_KIND_ADAPTER, "Qwen3-Next and Qwen3.5-MoE family adapter") {
    registrar.add(std::make_unique<moequant::adapters::Qwen3NextAdapter>());
}
