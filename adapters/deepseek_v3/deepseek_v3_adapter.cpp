// DeepSeek-V3 / R1 / V3.1 / V3.2 and Kimi-K2 / K2-Thinking / K2.5 / K2.6 (model-families.md §5.1,
// model-families-2026.md §3.1, §3.2): FP8 E4M3 experts with 128x128 `weight_scale_inv` blocks
// (Kimi-K2-Thinking / K2.5: compressed-tensors INT4), dense first layers (first_k_dense_replace),
// one shared expert, a sigmoid router with e_score_correction_bias, MLA attention, an MTP layer
// at index num_hidden_layers (DeepSeek) and rotary_emb.inv_freq buffers (Kimi).
//
// DeepSeek-V3.2 (`deepseek_v32`) is owned here rather than by an adapter of its own: its
// architecture and tensors are V3's plus a per-layer attention indexer (self_attn.indexer.*,
// copied as attention), and the indexer only changes which keys attention sees. One adapter,
// one forward: V3's dense MLA, exact while no sample exceeds index_topk (mla_decoder.hpp).
// Kimi-K2.5 (`kimi_k25`) is Kimi-K2 nested in a VLM: text_config, `language_model.` names and
// vision tensors (vision_tower.*, mm_projector.*) the plan leaves as `other`, copied unchanged.
// Kimi-K2.6 is K2.5's architecture and model_type; `synth --family kimi_k26` writes its release's
// config values and shard names (docs/families.md).
// GLM-5 / 5.1 / 5.2 (`glm_moe_dsa`, model-families-2026.md §3.4) is V3.2's architecture with
// GLM's sizes, one expert group and chat format; GLM-5.2's "shared" indexer layers (indexer_types)
// carry no indexer tensors, which the plan does not need.

#include "mla_decoder.hpp"
#include "config_counts.hpp"
#include "rule_based_adapter.hpp"
#include "synth/family_checkpoint.hpp"
#include "synth/synth_blocks.hpp"

#include <moequant/error.hpp>
#include <moequant/plugin.hpp>

#include <boost/json.hpp>

namespace moequant::adapters {
namespace {

bool is_glm5(const ModelConfig& c) { return c.model_type() == "glm_moe_dsa"; }

// GLM-5's MoE layers: GlmMoeDsaConfig derives `mlp_layer_types` from first_k_dense_replace
// (default 3) and the model follows the list (moe_layer_freq is not read). A list that
// disagrees with first_k_dense_replace leaves no way to tell which one the checkpoint follows:
// refused, as is one that is not num_hidden_layers entries of "dense" / "sparse".
bool glm5_moe_layer(const ModelConfig& config, std::int64_t layer) {
    const bool sparse = layer >= config.int_or("first_k_dense_replace", 3);
    const auto types = config.find("mlp_layer_types");
    if (!types || types->is_null()) return sparse;
    auto refuse = [&](const std::string& why) {
        throw Error(ErrorKind::input, "'mlp_layer_types' " + why, {.file = config.source(), .code = "InvalidConfig"});
    };
    const std::int64_t layers = positive_int(config, "num_hidden_layers");
    if (!types->is_array() || static_cast<std::int64_t>(types->size()) != layers)
        refuse("must list \"dense\" or \"sparse\" for each of the " + std::to_string(layers) + " layers (num_hidden_layers)");
    const ConfigValue entry = types->at(static_cast<std::size_t>(layer));
    const std::string type = entry.is_string() ? entry.as_string() : entry.to_json();
    if (type != "dense" && type != "sparse")
        refuse("entry " + std::to_string(layer) + " is " + type + ", not \"dense\" or \"sparse\"");
    if ((type == "sparse") != sparse)
        refuse("makes layer " + std::to_string(layer) + " " + type + ", but first_k_dense_replace (" +
               std::to_string(config.int_or("first_k_dense_replace", 3)) + ") makes it " + (sparse ? "sparse" : "dense"));
    return sparse;
}

FamilyRules deepseek_rules() {
    FamilyRules r = family_rules(
        "DeepSeek-V3/R1/V3.1/V3.2, Kimi-K2/K2.5/K2.6 and GLM-5: FP8 block-scaled experts, MLA, shared expert, MTP",
        {"deepseek_v3", "kimi_k2", "deepseek_v32", "kimi_k25", "glm_moe_dsa"},
        {"DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "KimiK25ForConditionalGeneration", "GlmMoeDsaForCausalLM"},
        deepseek_expert_keys());
    r.expert_count_keys.push_back("num_local_experts");
    r.releases = {{"kimi_k26", "kimi_k25", "Kimi-K2.6: K2.5's tensors, 262144 positions (YaRN x64), shards 00001-of-0000NN"}};
    r.is_moe_layer = [](const ModelConfig& c, std::int64_t layer) {
        return is_glm5(c) ? glm5_moe_layer(c, layer) : moe_from_first_k_dense(c, layer);
    };
    // HF DeepseekV3Config defaults: n_group 8, topk_group 4, routed_scaling_factor 2.5;
    // GlmMoeDsaConfig's: 1, 1, 2.5.
    r.router = [](const ModelConfig& c, std::int64_t k) {
        return noaux_tc_router(c, k, is_glm5(c) ? NoauxDefaults{1, 1, 2.5} : NoauxDefaults{8, 4, 2.5});
    };
    r.chat = [](const ModelConfig& c) {
        if (is_glm5(c)) return glm_chat_template();
        ChatTemplate t;
        if (c.model_type() == "kimi_k2") {  // Kimi-K2: <|im_role|>role<|im_middle|>content<|im_end|>
            t.system = {"<|im_system|>system<|im_middle|>", "<|im_end|>"};
            t.user = {"<|im_user|>user<|im_middle|>", "<|im_end|>"};
            t.assistant = {"<|im_assistant|>assistant<|im_middle|>", "<|im_end|>"};
            return t;
        }
        t.begin = "<\uff5cbegin\u2581of\u2581sentence\uff5c>";  // the system prompt follows BOS directly
        t.user = {"<\uff5cUser\uff5c>", ""};
        t.assistant = {"<\uff5cAssistant\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>"};
        return t;
    };
    return r;
}

// Sizes of one synthetic preset. Expert matrices are multiples of 128 in both directions (the
// AMX INT4 rule with 2 threadpool parts: (I/2) % 128 == 0, H % 128 == 0, and the GPU kernels'
// group size 128); attention and the dense MLP are not, so FP8 scales have edge blocks.
// The DeepSeek-V3.2 indexer (64 heads of 128, top 2048 in the real model) is scaled down with
// the rest; index_topk is small so that the calibration limit it sets can be exercised.
struct Preset : SynthSizes {  // kv_heads = heads: MLA's config repeats the head count
    std::int64_t dense_intermediate, first_dense, groups, top_groups, q_lora, kv_lora, qk_nope, qk_rope, v_head,
        index_heads, index_head_dim, index_topk;
};

constexpr Preset tiny{{256, 3, 8, 2, 256, 2, 2, 0, 512}, 320, 1, 2, 1, 192, 128, 32, 32, 32, 2, 64, 64};
constexpr Preset small{{512, 6, 16, 4, 512, 4, 4, 0, 1024}, 704, 2, 4, 2, 384, 256, 64, 32, 64, 4, 64, 256};
// GLM-5: one expert group, and MLA heads in GLM-5's proportions (qk_nope 192 : rope 64 : v 256,
// so v_head_dim differs from qk_nope_head_dim and equals qk_head_dim).
// DeepSeek-V3's released sizes (model-families.md §5.1), for `--preset full`: written sparse,
// every value zero (SynthSettings::full).
constexpr Preset full_size{{7168, 61, 256, 8, 2048, 128, 128, 0, 129280}, 18432, 3, 8, 4, 1536, 512, 128, 64, 128, 64, 128, 2048};
constexpr Preset glm5_tiny{{256, 3, 8, 2, 256, 2, 2, 0, 512}, 320, 1, 1, 1, 192, 128, 48, 16, 64, 2, 64, 64};
constexpr Preset glm5_small{{512, 6, 16, 4, 512, 4, 4, 0, 1024}, 704, 2, 1, 1, 384, 256, 96, 32, 128, 4, 64, 256};

// GLM-5.2's IndexShare as synthesized: layers 2, 4, ... reuse the previous layer's top-k
// ("shared", no indexer tensors), the rest and the MTP layer run their own (index_topk_freq 2,
// index_skip_topk_offset 2 in GlmMoeDsaConfig's terms).
bool shared_indexer(const Preset& p, std::int64_t layer) { return layer < p.layers && layer >= 2 && layer % 2 == 0; }

class DeepseekV3Adapter final : public RuleBasedAdapter {
public:
    DeepseekV3Adapter() : RuleBasedAdapter(deepseek_rules()) {}

    std::unique_ptr<DecoderForward> decoder_forward(const ModelConfig& config, const Checkpoint& checkpoint,
                                                    const ModelPlan& plan) const override {
        return make_mla_decoder(config, checkpoint, plan);
    }

    void synthesize(const std::filesystem::path& directory, const Options& options) const override {
        const SynthSettings s = read_synth_settings(options, rules().model_types, {"per-expert"}, rules().releases, {"deepseek_v3"});
        const bool k25 = s.model_type == "kimi_k25";
        const bool k26 = s.release == "kimi_k26";
        const bool kimi = s.model_type == "kimi_k2" || k25;
        const bool glm5 = s.model_type == "glm_moe_dsa";
        const bool dsa = s.model_type == "deepseek_v32" || glm5;  // a lightning indexer per layer
        // Kimi-K2.5 keeps the language model under `language_model.` (model-families-2026.md §2.2).
        const std::string lm = k25 ? "language_model." : "";
        Preset p = s.full ? full_size : glm5 ? (s.small ? glm5_small : glm5_tiny) : (s.small ? small : tiny);
        if (kimi) {  // Kimi-K2: one dense layer, a single expert group, no MTP layer
            p.first_dense = 1;
            p.groups = 1;
            p.top_groups = 1;
        }
        const std::int64_t mtp_layers = kimi ? 0 : 1;

        const std::vector<std::string> specials = kimi ? std::vector<std::string>{"[BOS]", "[EOS]", "[PAD]"}
                                                       : std::vector<std::string>{"<｜begin▁of▁sentence｜>",
                                                                                  "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"};
        const SynthTokenizer tokenizer =
            glm5 ? glm_style_tokenizer(p.vocab)
                 : make_synth_tokenizer({.vocab_size = s.full ? small.vocab : p.vocab, .special_tokens = specials, .bos_token = specials[0],
                                         .eos_token = specials[1]});

        // The full preset's table is padded beyond its tokenizer, as the release's is.
        const std::int64_t vocab = s.full ? p.vocab : tokenizer.vocab_size;
        json::value config_file = config(p, s, kimi, mtp_layers, tokenizer);
        if (s.full) config_file.as_object()["vocab_size"] = vocab;
        if (k25) config_file = vlm_config(std::move(config_file), p);
        const bool fp8 = s.fp8;
        const std::int64_t H = p.hidden;
        FamilyCheckpoint checkpoint{.tokenizer = tokenizer, .config = std::move(config_file), .hidden = H, .root = lm + "model.",
                                    .head = lm + "lm_head.weight", .layers = p.layers + mtp_layers};
        checkpoint.vocab = vocab;
        checkpoint.fp8_power_of_two_scales = s.model_type == "deepseek_v32";  // its config says scale_fmt ue8m0
        checkpoint.layer = [&](std::vector<SynthTensor>& t, const std::string& l, std::int64_t layer) {
            t.push_back(norm_weight(l + "input_layernorm.weight", H));
            t.push_back(norm_weight(l + "post_attention_layernorm.weight", H));
            t.push_back(linear_weight(l + "self_attn.q_a_proj.weight", p.q_lora, H, fp8));
            t.push_back(norm_weight(l + "self_attn.q_a_layernorm.weight", p.q_lora));
            t.push_back(linear_weight(l + "self_attn.q_b_proj.weight", p.heads * (p.qk_nope + p.qk_rope), p.q_lora, fp8));
            t.push_back(linear_weight(l + "self_attn.kv_a_proj_with_mqa.weight", p.kv_lora + p.qk_rope, H, fp8));
            t.push_back(norm_weight(l + "self_attn.kv_a_layernorm.weight", p.kv_lora));
            t.push_back(linear_weight(l + "self_attn.kv_b_proj.weight", p.heads * (p.qk_nope + p.v_head), p.kv_lora, fp8));
            t.push_back(linear_weight(l + "self_attn.o_proj.weight", H, p.heads * p.v_head, fp8));
            // The lightning indexer (model-families-2026.md §3.1, §3.4), absent from GLM-5.2's
            // shared layers; weights_proj is never quantized.
            if (dsa && !(glm5 && shared_indexer(p, layer))) {
                const std::string x = l + "self_attn.indexer.";
                t.push_back(linear_weight(x + "wq_b.weight", p.index_heads * p.index_head_dim, p.q_lora, fp8));
                t.push_back(linear_weight(x + "wk.weight", p.index_head_dim, H, fp8));
                t.push_back(norm_weight(x + "k_norm.weight", p.index_head_dim));
                t.push_back(bf16_tensor(x + "k_norm.bias", {p.index_head_dim}));
                t.push_back(bf16_tensor(x + "weights_proj.weight", {p.index_heads, H}));
            }
            if (kimi)
                t.push_back({l + "self_attn.rotary_emb.inv_freq", DType::BF16, {p.qk_rope / 2}, SynthFill::inv_freq, 50000.0});
            const std::array<std::string, 3> proj{"gate_proj", "up_proj", "down_proj"};
            if (layer < p.first_dense) {
                add_swiglu(t, l + "mlp.", proj, p.dense_intermediate, H, fp8);
            } else {
                t.push_back(bf16_tensor(l + "mlp.gate.weight", {p.experts, H}));
                t.push_back({l + "mlp.gate.e_score_correction_bias", DType::F32, {p.experts}, SynthFill::normal, 0.01});
                for (std::int64_t e = 0; e < p.experts; ++e)
                    add_swiglu(t, l + "mlp.experts." + std::to_string(e) + ".", proj, p.expert_intermediate, H, fp8);
                add_swiglu(t, l + "mlp.shared_experts.", proj, p.expert_intermediate, H, fp8);
            }
            if (layer >= p.layers) {  // the MTP module's own tensors (README_WEIGHTS of DeepSeek-V3)
                t.push_back(embedding_weight(l + "embed_tokens.weight", vocab, H));
                t.push_back(norm_weight(l + "enorm.weight", H));
                t.push_back(norm_weight(l + "hnorm.weight", H));
                t.push_back(linear_weight(l + "eh_proj.weight", H, 2 * H, fp8));
                t.push_back(norm_weight(l + "shared_head.norm.weight", H));
                t.push_back(bf16_tensor(l + "shared_head.head.weight", {vocab, H}));
            }
        };
        if (k25)  // a token vision tower and projector: not the language model's, copied as they are
            checkpoint.after_head = [&](std::vector<SynthTensor>& t) {
                const std::int64_t V = 64;
                t.push_back(bf16_tensor("vision_tower.patch_embed.proj.weight", {V, 3, 14, 14}));
                t.push_back(bf16_tensor("vision_tower.encoder.blocks.0.wqkv.weight", {3 * V, V}));
                t.push_back(norm_weight("vision_tower.encoder.final_layernorm.weight", V));
                t.push_back(norm_weight("mm_projector.pre_norm.weight", V));
                t.push_back(bf16_tensor("mm_projector.proj.0.weight", {H, 4 * V}));
            };

        // DeepSeek and Kimi-K2.6 pad the shard number to 5 digits and the total to 6; GLM pads
        // both to 5; Kimi-K2 pads neither.
        checkpoint.shard_count = s.full ? 163 : s.small ? 7 : 5;  // the release has 163
        if (kimi && !k26) checkpoint.shard_name = &unpadded_shard_name;
        else if (!glm5) checkpoint.shard_name = [](std::size_t n, std::size_t c) { return padded_shard_name(n, c, 5, 6); };
        write_family_checkpoint(checkpoint, directory, s);
    }

private:
    static json::value config(const Preset& p, const SynthSettings& s, bool kimi, std::int64_t mtp_layers,
                              const SynthTokenizer& tokenizer) {
        const bool v32 = s.model_type == "deepseek_v32";
        // Kimi-K2.5's text_config says kimi_k2.
        json::object c = family_config(tokenizer, s.encoding, p, deepseek_expert_keys(),
                                       {s.model_type == "kimi_k25" ? "kimi_k2" : s.model_type,
                                        v32 ? "DeepseekV32ForCausalLM" : "DeepseekV3ForCausalLM"});
        if (v32 || s.model_type == "glm_moe_dsa") {
            c["index_head_dim"] = p.index_head_dim;
            c["index_n_heads"] = p.index_heads;
            c["index_topk"] = p.index_topk;
        }
        if (auto* q = c.if_contains("quantization_config"); q && v32 && s.encoding == SynthEncoding::fp8_block)
            q->as_object()["scale_fmt"] = "ue8m0";
        c["attention_bias"] = false;
        c["first_k_dense_replace"] = p.first_dense;
        c["intermediate_size"] = p.dense_intermediate;
        c["kv_lora_rank"] = p.kv_lora;
        // Kimi-K2.6's 256K context: 262144 positions, YaRN factor 64 over 4096 (docs/families.md).
        const bool k26 = s.release == "kimi_k26";
        c["max_position_embeddings"] = k26 ? 262144 : kimi ? 131072 : 163840;
        c["moe_layer_freq"] = 1;
        c["n_group"] = p.groups;
        c["n_shared_experts"] = 1;
        c["norm_topk_prob"] = true;
        c["num_nextn_predict_layers"] = mtp_layers;
        c["q_lora_rank"] = p.q_lora;
        c["qk_nope_head_dim"] = p.qk_nope;
        c["qk_rope_head_dim"] = p.qk_rope;
        c["rms_norm_eps"] = 1e-06;
        c["rope_scaling"] = json::object{{"beta_fast", kimi ? 1.0 : 32.0},
                                         {"beta_slow", 1.0},
                                         {"factor", k26 ? 64.0 : kimi ? 32.0 : 40.0},
                                         {"mscale", 1.0},
                                         {"mscale_all_dim", 1.0},
                                         {"original_max_position_embeddings", 4096},
                                         {"type", "yarn"}};
        c["rope_theta"] = kimi ? 50000.0 : 10000.0;
        c["routed_scaling_factor"] = kimi ? 2.827 : 2.5;
        c["scoring_func"] = "sigmoid";
        c["topk_group"] = p.top_groups;
        c["topk_method"] = "noaux_tc";
        c["v_head_dim"] = p.v_head;
        if (s.model_type == "glm_moe_dsa") glm5_config(c, p, s);
        return c;
    }

    // What GLM-5's config.json has beyond V3.2's keys, or otherwise (model-families-2026.md §3.4):
    // transformers 5's rope_parameters without scaling, GLM's sizes and eps, the per-layer lists.
    static void glm5_config(json::object& c, const Preset& p, const SynthSettings& s) {
        c["architectures"] = json::array{"GlmMoeDsaForCausalLM"};
        c.erase("rope_scaling");
        c.erase("rope_theta");
        c["rope_parameters"] = json::object{{"rope_theta", 1000000.0}, {"rope_type", "default"}};  // not the 10000 default
        c["rope_interleave"] = true;
        c["indexer_rope_interleave"] = true;
        c["head_dim"] = p.qk_rope;  // GlmMoeDsaConfig points head_dim at the rope slice
        c["max_position_embeddings"] = 202752;
        c["rms_norm_eps"] = 1e-05;
        c["transformers_version"] = "5.0.0";
        json::array mlp, indexer;
        for (std::int64_t l = 0; l < p.layers; ++l) {
            mlp.push_back(l < p.first_dense ? "dense" : "sparse");
            indexer.push_back(shared_indexer(p, l) ? "shared" : "full");
        }
        c["mlp_layer_types"] = std::move(mlp);
        c["indexer_types"] = std::move(indexer);
        // GLM-5-FP8: DeepSeek's block-128 fp8 config without scale_fmt, the indexer's score
        // projection (named `indexers_proj` there) left unconverted.
        if (auto* q = c.if_contains("quantization_config"); q && s.encoding == SynthEncoding::fp8_block) {
            json::array keep{"lm_head", "model.embed_tokens"};
            for (std::int64_t l = 0; l < p.layers; ++l)
                keep.push_back(json::string("model.layers." + std::to_string(l) + ".self_attn.indexers_proj"));
            q->as_object()["modules_to_not_convert"] = std::move(keep);
        }
    }

    // Kimi-K2.5's config.json: the language model's settings (quantization_config included) in
    // text_config, a vision_config beside it.
    static json::value vlm_config(json::value text, const Preset& p) {
        json::object root{{"architectures", json::array{"KimiK25ForConditionalGeneration"}},
                          {"model_type", "kimi_k25"},
                          {"torch_dtype", "bfloat16"},
                          {"transformers_version", "4.57.1"},
                          {"tie_word_embeddings", false},
                          {"vision_config", json::object{{"model_type", "kimi_k25_vision"},
                                                         {"hidden_size", 64},
                                                         {"num_hidden_layers", 1},
                                                         {"patch_size", 14},
                                                         {"text_hidden_size", p.hidden}}}};
        text.as_object()["architectures"] = json::array{"DeepseekV3ForCausalLM"};
        root["text_config"] = std::move(text);
        return root;
    }
};

}  // namespace
}  // namespace moequant::adapters

MOEQUANT_PLUGIN("deepseek_v3", "0.1.0", MOEQUANT_KIND_ADAPTER,
                "DeepSeek-V3/R1/V3.1/V3.2, Kimi-K2/K2.5/K2.6 and GLM-5/5.1/5.2 family adapter") {
    registrar.add(std::make_unique<moequant::adapters::DeepseekV3Adapter>());
}
