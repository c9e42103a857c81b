// MiniMax-M3 (docs/families.md; its MXFP8 release and the BF16 one). What differs from
// MiniMax-M2 (minimax_rules.hpp holds what they share):
// - a VLM: config.json's top level says minimax_m3_vl / MiniMaxM3SparseForConditionalGeneration
//   and holds the language model's settings in text_config, whose model_type is "minimax_m2"
//   (the family is told by the top level); the language model under `language_model.model.`
//   and `language_model.lm_head`, a vision tower and projector beside it (copied unchanged);
// - dense layers: `moe_layer_freq` lists per layer 0 (dense `mlp.{gate,up,down}_proj`,
//   dense_intermediate_size) or 1 (MoE); a shared expert `block_sparse_moe.shared_experts.*`
//   (n_shared_experts x shared_intermediate_size) added unscaled; the routed output scaled by
//   routed_scaling_factor;
// - the "swigluoai" activation in every MLP: (clamp(up) + 1) * g * sigmoid(alpha * g),
//   g = min(gate, limit);
// - Gemma RMSNorms ((1 + w) x, use_gemma_norm), q_norm/k_norm per head;
// - MiniMax Sparse Attention: a lightning indexer (`self_attn.index_*`) keeps sparse_topk_blocks
//   blocks of sparse_block_size keys, so attention is exactly dense up to that many tokens per
//   sample (2048 in the release); the calibration forward runs dense attention and refuses
//   longer samples;
// - MTP modules under `language_model.model.mtp.` (skipped).
// Experts in MXFP8 (the mxfp8 encoding) or BF16.

#include "gqa_family_adapter.hpp"
#include "minimax_rules.hpp"
#include "synth/family_checkpoint.hpp"
#include "synth/synth_blocks.hpp"

#include <moequant/error.hpp>
#include <moequant/plugin.hpp>

#include <boost/json.hpp>

namespace moequant::adapters {
namespace {

[[noreturn]] void invalid_config(const ModelConfig& config, const std::string& message) {
    throw Error(ErrorKind::input, message, {.file = config.source(), .code = "InvalidConfig"});
}

// moe_layer_freq: one entry per decoder layer, 0 dense and 1 MoE; absent, every layer is MoE.
bool m3_moe_layer(const ModelConfig& config, std::int64_t layer) {
    auto freq = config.find("moe_layer_freq");
    if (!freq || freq->is_null()) return true;
    const std::int64_t layers = config.require_int("num_hidden_layers");
    if (!freq->is_array() || static_cast<std::int64_t>(freq->size()) != layers)
        invalid_config(config, "'moe_layer_freq' must list 0 (dense) or 1 (MoE) for each of the " + std::to_string(layers) +
                                   " layers (num_hidden_layers)");
    const ConfigValue entry = freq->at(static_cast<std::size_t>(layer));
    if (!entry.is_number() || (entry.as_double() != 0 && entry.as_double() != 1))
        invalid_config(config, "'moe_layer_freq' entry " + std::to_string(layer) + " is " + entry.to_json() + ", not 0 or 1");
    return entry.as_double() != 0;
}

// hidden_act: "swigluoai" (the release) with swiglu_alpha and swiglu_limit, or "silu".
GatedActivation m3_activation(const ModelConfig& config) {
    const std::string act = config.string_or("hidden_act", "swigluoai");
    if (act == "silu") return {};
    if (act != "swigluoai") invalid_config(config, "hidden_act '" + act + "' is not supported for minimax_m3 (swigluoai, silu)");
    GatedActivation a{.kind = GatedActivationKind::clamped_swiglu};
    if (auto v = config.find("swiglu_alpha"); v && !v->is_null()) a.alpha = static_cast<float>(v->as_double());
    if (auto v = config.find("swiglu_limit"); v && !v->is_null()) a.limit = static_cast<float>(v->as_double());
    // swiglu_beta is the 1 added to up; only that one is implemented.
    if (auto v = config.find("swiglu_beta"); v && !v->is_null() && v->as_double() != 1.0)
        invalid_config(config, "swiglu_beta " + v->to_json() + " is not supported for minimax_m3 (1.0: (up + 1))");
    if (!(a.limit > 0) || !(a.alpha > 0)) invalid_config(config, "swiglu_alpha and swiglu_limit must be positive");
    return a;
}

FamilyRules minimax_m3_rules() {
    FamilyRules r = minimax_family_rules(
        "MiniMax-M3: MXFP8 block_sparse_moe experts, shared expert, dense first layers, swigluoai, sparse attention",
        {"minimax_m3", "minimax_m3_vl"}, {"MiniMaxM3SparseForConditionalGeneration", "MiniMaxM3SparseForCausalLM"});
    r.is_moe_layer = &m3_moe_layer;
    // M2's markers, but a user's system prompt goes in a "developer" turn (the template's own
    // system turn carries the model's identity and thinking instructions, not modelled here, nor
    // the "</mm:think>" its past assistant turns start with): docs/families.md.
    r.chat = [](const ModelConfig&) {
        return ChatTemplate{.begin = "]~!b[", .system = {"]~b]developer\n", "[e~[\n"}, .user = {"]~b]user\n", "[e~[\n"},
                            .assistant = {"]~b]ai\n", "[e~[\n"}};
    };
    return r;
}

struct Preset : SynthSizes {
    std::int64_t rotary_dim, dense_layers, dense_intermediate, shared_intermediate, index_heads, index_dim;
};
// One index head per KV head, as in the release (4 and 4) and as llama.cpp's MSA requires.
constexpr Preset tiny{{256, 3, 8, 2, 256, 4, 1, 64, 512}, 32, 1, 512, 256, 1, 64};
constexpr Preset small{{512, 4, 16, 4, 512, 8, 2, 64, 1024}, 32, 1, 1024, 512, 2, 64};
constexpr std::int64_t sparse_block = 32, sparse_blocks = 16;  // dense up to 512 tokens (the release: 128 x 16)

class MiniMaxM3Adapter final : public GqaFamilyAdapter {
public:
    MiniMaxM3Adapter() : GqaFamilyAdapter(minimax_m3_rules()) {}

    ModelPlan plan(const ModelConfig& config, const Checkpoint& checkpoint) const override {
        ModelPlan plan = GqaFamilyAdapter::plan(config, checkpoint);
        if (auto v = config.root().get("model_type"); v && v->is_string()) plan.model_type = v->as_string();
        plan.expert_activation = m3_activation(config);
        if (plan.expert_activation.kind != GatedActivationKind::silu)
            plan.warnings.push_back(
                "MiniMax-M3's experts use the swigluoai activation, which kt-kernel's AMX INT4/INT8 and MOE_INT8 kernels do "
                "not compute (they apply silu(gate) * up): kt runs M3's CPU experts with its native MXFP8 method on the "
                "release's files; GPU formats keep the activation to the serving engine");
        return plan;
    }

    void adjust_attention(const ModelConfig& config, GqaAttentionSpec& attention) const override {
        if (config_flag(config, "use_qk_norm", true)) {
            const std::string type = config.string_or("qk_norm_type", "per_head");
            if (type != "per_head") invalid_config(config, "qk_norm_type '" + type + "' is not supported for minimax_m3 (per_head)");
            attention.qk_norm = true;
        }
        if (config_flag(config, "attention_output_gate", false))
            invalid_config(config, "attention_output_gate is not supported for minimax_m3");
        attention.rotary_dim = partial_rotary_dim(config, attention.head_dim);
        attention.sparse = sparse_window(config);
    }

    void adjust_decoder(const ModelConfig& config, const ModelPlan& plan, DecoderSpec& decoder) const override {
        decoder.zero_centred_norms = config_flag(config, "use_gemma_norm", false);
        decoder.mlp_activation = plan.expert_activation;
        decoder.dense_intermediate = config.int_or("dense_intermediate_size", decoder.dense_intermediate);
        const std::int64_t shared = config.int_or("n_shared_experts", 0);
        if (shared < 0) invalid_config(config, "'n_shared_experts' is negative");
        if (shared > 0) {
            decoder.shared_experts = "block_sparse_moe.shared_experts.";
            decoder.shared_intermediate = shared * config.int_or("shared_intermediate_size", plan.expert_intermediate_size);
        }
    }

    void synthesize(const std::filesystem::path& directory, const Options& options) const override {
        const SynthSettings s = read_synth_settings(options, rules().model_types, {"per-expert"});
        const Preset p = s.small ? small : tiny;
        const SynthTokenizer tokenizer = minimax_style_tokenizer(p.vocab);
        const std::int64_t H = p.hidden;
        const bool q = s.fp8;  // every linear but the router is quantized in the MXFP8 release
        FamilyCheckpoint checkpoint{.tokenizer = tokenizer, .config = config(p, s, tokenizer), .hidden = H,
                                    .root = "language_model.model.", .head = "language_model.lm_head.weight",
                                    .layers = p.layers};
        checkpoint.before_embedding = [&](std::vector<SynthTensor>& t) { add_vision_tower(t, H); };
        checkpoint.layer = [&](std::vector<SynthTensor>& t, const std::string& l, std::int64_t layer) {
            add_layer(t, l, p, layer >= p.dense_layers, q);
        };
        // One MTP module: enorm/hnorm/eh_proj, a whole sparse-attention MoE layer, its final norm.
        checkpoint.after_head = [&](std::vector<SynthTensor>& t) {
            const std::string m = "language_model.model.mtp.layers.0.";
            t.push_back(bf16_tensor(m + "enorm.weight", {H}));
            t.push_back(bf16_tensor(m + "hnorm.weight", {H}));
            t.push_back(linear_weight(m + "eh_proj.weight", H, 2 * H, q));
            add_layer(t, m + "transformer_layer.", p, true, q);
            t.push_back(bf16_tensor(m + "final_layernorm.weight", {H}));
        };
        checkpoint.shard_count = s.small ? 5 : 3;
        write_family_checkpoint(checkpoint, directory, s);
    }

private:
    static DenseAttentionWindow sparse_window(const ModelConfig& config) {
        DenseAttentionWindow w{.family = "MiniMax-M3", .setting = "sparse_topk_blocks x sparse_block_size",
                               .config_file = config.source()};
        auto sparse = config.find("sparse_attention_config");
        if (!sparse || !sparse->is_object()) return w;
        auto flag = sparse->get("use_sparse_attention");
        if (flag && flag->is_bool() && !flag->as_bool()) return w;
        auto count = [&](const char* key) {
            auto v = sparse->get(key);
            if (!v || !v->is_number() || v->as_double() < 1 || v->as_double() > 1 << 20)
                invalid_config(config, "'sparse_attention_config." + std::string(key) + "' must be a positive count");
            return static_cast<std::int64_t>(v->as_double());
        };
        w.tokens = count("sparse_topk_blocks") * count("sparse_block_size");
        return w;
    }

    // Gemma norms (stored near 0), per-head q/k norms, the indexer in MoE layers.
    static void add_layer(std::vector<SynthTensor>& t, const std::string& l, const Preset& p, bool moe, bool q) {
        const std::int64_t H = p.hidden;
        t.push_back(bf16_tensor(l + "input_layernorm.weight", {H}));
        add_gqa_attention(t, l, {H, p.heads, p.kv_heads, p.head_dim}, q);
        t.push_back(bf16_tensor(l + "self_attn.q_norm.weight", {p.head_dim}));
        t.push_back(bf16_tensor(l + "self_attn.k_norm.weight", {p.head_dim}));
        if (moe) {  // the lightning indexer: several query heads, one key head, no value
            t.push_back(linear_weight(l + "self_attn.index_q_proj.weight", p.index_heads * p.index_dim, H, q));
            t.push_back(linear_weight(l + "self_attn.index_k_proj.weight", p.index_dim, H, q));
            t.push_back(bf16_tensor(l + "self_attn.index_q_norm.weight", {p.index_dim}));
            t.push_back(bf16_tensor(l + "self_attn.index_k_norm.weight", {p.index_dim}));
        }
        t.push_back(bf16_tensor(l + "post_attention_layernorm.weight", {H}));
        if (!moe) {
            add_swiglu(t, l + "mlp.", {"gate_proj", "up_proj", "down_proj"}, p.dense_intermediate, H, q);
            return;
        }
        const std::string b = l + "block_sparse_moe.";
        t.push_back({b + "gate.weight", DType::F32, {p.experts, H}, SynthFill::normal, 0.02});
        t.push_back({b + "e_score_correction_bias", DType::F32, {p.experts}, SynthFill::normal, 0.01});
        for (std::int64_t e = 0; e < p.experts; ++e)
            add_swiglu(t, b + "experts." + std::to_string(e) + ".", {"w1", "w3", "w2"}, p.expert_intermediate, H, q);
        add_swiglu(t, b + "shared_experts.", {"gate_proj", "up_proj", "down_proj"}, p.shared_intermediate, H, q);
    }

    // A token vision tower and projector: not the language model's, copied as they are.
    static void add_vision_tower(std::vector<SynthTensor>& t, std::int64_t hidden) {
        const std::int64_t V = 64;
        t.push_back(bf16_tensor("vision_tower.vision_model.embeddings.patch_embedding.weight", {V, 3, 14, 14}));
        t.push_back(bf16_tensor("vision_tower.vision_model.encoder.layers.0.self_attn.q_proj.weight", {V, V}));
        t.push_back(bf16_tensor("vision_tower.vision_model.post_layernorm.weight", {V}));
        t.push_back(bf16_tensor("multi_modal_projector.linear_1.weight", {hidden, V}));
        t.push_back(bf16_tensor("patch_merge_mlp.0.weight", {V, 4 * V}));
    }

    static json::value config(const Preset& p, const SynthSettings& s, const SynthTokenizer& tokenizer) {
        // text_config says minimax_m2 as the release's does (the trap detection must avoid).
        json::object c = family_config(tokenizer, s.encoding, p, mixtral_expert_keys(), {"minimax_m2", ""});
        json::value quantization = c.contains("quantization_config") ? c["quantization_config"] : json::value();
        c.erase("quantization_config");
        json::array moe_freq, sparse_freq;
        for (std::int64_t l = 0; l < p.layers; ++l) {
            moe_freq.push_back(l >= p.dense_layers ? 1 : 0);
            sparse_freq.push_back(l >= p.dense_layers ? 1 : 0);
        }
        c["attention_output_gate"] = false;
        c["dense_intermediate_size"] = p.dense_intermediate;
        c["hidden_act"] = "swigluoai";
        c["max_position_embeddings"] = 524288;
        c["moe_layer_freq"] = std::move(moe_freq);
        c["n_shared_experts"] = 1;
        c["num_mtp_modules"] = 1;
        c["num_nextn_predict_layers"] = 1;
        c["partial_rotary_factor"] = static_cast<double>(p.rotary_dim) / static_cast<double>(p.head_dim);
        c["qk_norm_type"] = "per_head";
        c["rms_norm_eps"] = 1e-06;
        c["rope_theta"] = 5000000;
        c["rotary_dim"] = p.rotary_dim;
        c["routed_scaling_factor"] = 2.0;
        c["scoring_func"] = "sigmoid";
        c["shared_intermediate_size"] = p.shared_intermediate;
        c["sparse_attention_config"] = json::object{{"use_sparse_attention", true},
                                                    {"sparse_index_dim", p.index_dim},
                                                    {"sparse_num_index_heads", p.index_heads},
                                                    {"sparse_topk_blocks", sparse_blocks},
                                                    {"sparse_block_size", sparse_block},
                                                    {"sparse_init_block", 0},
                                                    {"sparse_local_block", 1},
                                                    {"sparse_score_type", "max"},
                                                    {"sparse_attention_freq", std::move(sparse_freq)}};
        c["swiglu_alpha"] = 1.702;
        c["swiglu_beta"] = 1.0;
        c["swiglu_limit"] = 7.0;
        c["use_gemma_norm"] = true;
        c["use_qk_norm"] = true;
        c["use_routing_bias"] = true;
        json::object root{{"architectures", json::array{"MiniMaxM3SparseForConditionalGeneration"}},
                          {"model_type", "minimax_m3_vl"},
                          {"image_token_index", p.vocab - 2},
                          {"video_token_index", p.vocab - 1},
                          {"tie_word_embeddings", false},
                          {"torch_dtype", "bfloat16"},
                          {"transformers_version", "4.57.1"},
                          {"vision_config", json::object{{"model_type", "clip_vision_model"},
                                                         {"hidden_size", 64},
                                                         {"num_hidden_layers", 1},
                                                         {"patch_size", 14}}}};
        if (!quantization.is_null()) {  // the release's: the router and the model's ends stay unquantized
            json::array ignored{"lm_head", "model.embed_tokens"};
            for (std::int64_t l = p.dense_layers; l < p.layers; ++l)
                ignored.push_back(json::string("model.layers." + std::to_string(l) + ".block_sparse_moe.gate"));
            quantization.as_object()["ignored_layers"] = std::move(ignored);
            root["quantization_config"] = std::move(quantization);
        }
        root["text_config"] = std::move(c);
        return root;
    }
};

}  // namespace
}  // namespace moequant::adapters

MOEQUANT_PLUGIN("minimax_m3", "0.1.0", MOEQUANT_KIND_ADAPTER, "MiniMax-M3 family adapter") {
    registrar.add(std::make_unique<moequant::adapters::MiniMaxM3Adapter>());
}
