#include "gguf_architecture.hpp"

#include "gguf_rope_keys.hpp"

#include <moequant/error.hpp>

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>

namespace moequant::formats {
namespace {

// "model.layers.{L}.{rest}" -> {L, rest}; nullopt for other names.
std::optional<std::pair<std::int64_t, std::string>> layer_tensor(const std::string& name) {
    constexpr std::string_view prefix = "model.layers.";
    if (name.rfind(prefix, 0) != 0) return std::nullopt;
    const char* begin = name.data() + prefix.size();
    std::int64_t layer = -1;
    auto [end, ec] = std::from_chars(begin, name.data() + name.size(), layer);
    if (ec != std::errc() || end == begin || *end != '.') return std::nullopt;
    return std::pair{layer, std::string(end + 1)};
}

using NameTable = std::map<std::string, std::string>;

// The checkpoint names every family shares outside the layers.
const NameTable& global_names() {
    static const NameTable names = {
        {"model.embed_tokens.weight", "token_embd.weight"},
        {"model.norm.weight", "output_norm.weight"},
        {"lm_head.weight", "output.weight"},
    };
    return names;
}

// The converter's ModelBase.filter_tensors: a multimodal model's text weights lose their
// "language_model." (Kimi-K2.5's language_model.model.layers.L…, Qwen3-VL's model.language_model.…).
std::string text_model_name(std::string name) {
    constexpr std::string_view prefix = "language_model.";
    for (std::size_t at; (at = name.find(prefix)) != std::string::npos;) name.erase(at, prefix.size());
    return name;
}

// A name through the global table, or "model.layers.L.<rest>" through the per-layer one.
std::optional<std::string> mapped_name(const std::string& checkpoint_name, const NameTable& per_layer) {
    const std::string name = text_model_name(checkpoint_name);
    if (auto it = global_names().find(name); it != global_names().end()) return it->second;
    const auto layer = layer_tensor(name);
    if (!layer) return std::nullopt;
    const auto it = per_layer.find(layer->second);
    if (it == per_layer.end()) return std::nullopt;
    return "blk." + std::to_string(layer->first) + "." + it->second;
}

// The per-layer names every Llama-style decoder shares (gguf-py tensor_mapping): the two norms,
// q/k/v/o and their biases; a family adds its own to them.
NameTable llama_style_layer_names(const NameTable& own) {
    NameTable names = {
        {"input_layernorm.weight", "attn_norm.weight"},
        {"post_attention_layernorm.weight", "ffn_norm.weight"},
        {"self_attn.q_proj.weight", "attn_q.weight"},
        {"self_attn.k_proj.weight", "attn_k.weight"},
        {"self_attn.v_proj.weight", "attn_v.weight"},
        {"self_attn.o_proj.weight", "attn_output.weight"},
        {"self_attn.q_proj.bias", "attn_q.bias"},
        {"self_attn.k_proj.bias", "attn_k.bias"},
        {"self_attn.v_proj.bias", "attn_v.bias"},
    };
    names.insert(own.begin(), own.end());
    return names;
}

// The same, with the norm before the MoE as post_attention_norm (ATTN_POST_NORM: the
// architecture has no ffn_norm), as GLM-4.5 and gpt-oss have it.
NameTable post_attention_norm_layer_names(const NameTable& own) {
    NameTable names = llama_style_layer_names(own);
    names["post_attention_layernorm.weight"] = "post_attention_norm.weight";
    return names;
}

// DeepSeek's MoE block, which GLM-4.5 shares: the router and its correction bias, the shared
// experts, the dense first layers' MLP.
NameTable deepseek_moe_names(NameTable names) {
    names.insert({
        {"mlp.gate.weight", "ffn_gate_inp.weight"},
        {"mlp.gate.e_score_correction_bias", "exp_probs_b.bias"},
        {"mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight"},
        {"mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight"},
        {"mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight"},
        {"mlp.gate_proj.weight", "ffn_gate.weight"},
        {"mlp.up_proj.weight", "ffn_up.weight"},
        {"mlp.down_proj.weight", "ffn_down.weight"},
    });
    return names;
}

// Qwen3-MoE's names (llama.cpp gguf-py tensor_mapping, MODEL_TENSORS[QWEN3MOE]).
const NameTable& qwen3moe_layer_names() {
    static const NameTable per_layer = llama_style_layer_names({
        {"self_attn.q_norm.weight", "attn_q_norm.weight"},
        {"self_attn.k_norm.weight", "attn_k_norm.weight"},
        {"mlp.gate.weight", "ffn_gate_inp.weight"},
        // Dense layers (mlp_only_layers / decoder_sparse_step) keep a plain MLP.
        {"mlp.gate_proj.weight", "ffn_gate.weight"},
        {"mlp.up_proj.weight", "ffn_up.weight"},
        {"mlp.down_proj.weight", "ffn_down.weight"},
    });
    return per_layer;
}
std::optional<std::string> qwen3moe_tensor_name(const std::string& name) { return mapped_name(name, qwen3moe_layer_names()); }

// DeepSeek-V2/V3's names (MODEL_TENSORS[DEEPSEEK2]); kv_b_proj maps to attn_kv_b, which the
// plan writes split into attn_k_b / attn_v_b unless the architecture keeps it whole (mla_split).
const NameTable& deepseek2_layer_names() {
    static const NameTable per_layer = deepseek_moe_names({
        {"input_layernorm.weight", "attn_norm.weight"},
        {"post_attention_layernorm.weight", "ffn_norm.weight"},
        {"self_attn.q_proj.weight", "attn_q.weight"},
        {"self_attn.q_a_proj.weight", "attn_q_a.weight"},
        {"self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight"},
        {"self_attn.q_b_proj.weight", "attn_q_b.weight"},
        {"self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight"},
        {"self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight"},
        {"self_attn.kv_b_proj.weight", "attn_kv_b.weight"},
        {"self_attn.o_proj.weight", "attn_output.weight"},
    });
    return per_layer;
}
std::optional<std::string> deepseek2_tensor_name(const std::string& name) { return mapped_name(name, deepseek2_layer_names()); }

// Mixtral's names as llama's (MODEL_TENSORS[LLAMA]): the router is block_sparse_moe.gate.
// Mistral's native names (layers.L.attention.wq) are not mapped, as the converter does not.
const NameTable& llama_layer_names() {
    static const NameTable per_layer = llama_style_layer_names({
        {"self_attn.o_proj.bias", "attn_output.bias"},
        {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
        {"mlp.gate.weight", "ffn_gate_inp.weight"},  // transformers v5's fused-expert layout
    });
    return per_layer;
}
std::optional<std::string> llama_tensor_name(const std::string& name) { return mapped_name(name, llama_layer_names()); }

// GLM-4.5's names (MODEL_TENSORS[GLM4_MOE]): the norm before the MoE is post_attention_norm
// (ATTN_POST_NORM; there is no ffn_norm), DeepSeek's router and shared experts.
const NameTable& glm4moe_layer_names() {
    static const NameTable per_layer = post_attention_norm_layer_names(deepseek_moe_names({
        {"self_attn.q_norm.weight", "attn_q_norm.weight"},
        {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    }));
    return per_layer;
}
std::optional<std::string> glm4moe_tensor_name(const std::string& name) { return mapped_name(name, glm4moe_layer_names()); }

// MiniMax's per-layer names: Mixtral's block_sparse_moe router, its correction bias beside the
// gate (not under it), the q/k norms; a model adds its own to them.
NameTable minimax_layer_names(const NameTable& own) {
    NameTable names = llama_style_layer_names({
        {"self_attn.q_norm.weight", "attn_q_norm.weight"},
        {"self_attn.k_norm.weight", "attn_k_norm.weight"},
        {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
        {"block_sparse_moe.e_score_correction_bias", "exp_probs_b.bias"},
    });
    names.insert(own.begin(), own.end());
    return names;
}

// MiniMax-M2's names (MODEL_TENSORS[MINIMAXM2]); its q/k norms span the whole projection.
const NameTable& minimax_m2_layer_names() {
    static const NameTable per_layer = minimax_layer_names({});
    return per_layer;
}
std::optional<std::string> minimax_m2_tensor_name(const std::string& name) { return mapped_name(name, minimax_m2_layer_names()); }

// MiniMax-M3's names (MODEL_TENSORS[MINIMAXM3]): M2's (its q/k norms per head), the dense first
// layers' MLP, the shared expert, and MiniMax Sparse Attention's indexer.
std::optional<std::string> minimax_m3_tensor_name(const std::string& name) {
    static const NameTable per_layer = minimax_layer_names({
        {"mlp.gate_proj.weight", "ffn_gate.weight"},
        {"mlp.up_proj.weight", "ffn_up.weight"},
        {"mlp.down_proj.weight", "ffn_down.weight"},
        {"block_sparse_moe.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight"},
        {"block_sparse_moe.shared_experts.up_proj.weight", "ffn_up_shexp.weight"},
        {"block_sparse_moe.shared_experts.down_proj.weight", "ffn_down_shexp.weight"},
        {"self_attn.index_q_proj.weight", "indexer.q_proj.weight"},
        {"self_attn.index_k_proj.weight", "indexer.k_proj.weight"},
        {"self_attn.index_q_norm.weight", "indexer.q_norm.weight"},
        {"self_attn.index_k_norm.weight", "indexer.k_norm.weight"},
    });
    return mapped_name(name, per_layer);
}

// MiniMaxM3Model.modify_tensors: every *norm.weight gets + 1 (Gemma's (1 + w) RMSNorm baked in, so
// llama.cpp runs a plain one), the final norm, the per-head q/k norms and the indexer's included.
std::vector<GgufTensorTransform> minimax_m3_transforms(const std::string& name, const std::vector<std::int64_t>&) {
    if (!name.ends_with("norm.weight")) return {};
    if (auto gguf = minimax_m3_tensor_name(name)) return {{.gguf_name = *gguf, .values = GgufTensorTransform::Values::plus_one}};
    return {};
}

// Qwen3-Next's names (MODEL_TENSORS[QWEN3NEXT]): post_attention_layernorm is ATTN_POST_NORM
// (no ffn_norm), the shared expert with its sigmoid gate, and the gated delta-net layers'
// tensors (in_proj_qkvz, A_log, dt_bias and conv1d go through qwen3next_transforms).
std::optional<std::string> qwen3next_tensor_name(const std::string& name) {
    static const NameTable per_layer = post_attention_norm_layer_names({
        {"self_attn.q_norm.weight", "attn_q_norm.weight"},
        {"self_attn.k_norm.weight", "attn_k_norm.weight"},
        {"mlp.gate.weight", "ffn_gate_inp.weight"},
        {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
        {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
        {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
        {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
        {"linear_attn.in_proj_ba.weight", "ssm_ba.weight"},
        {"linear_attn.in_proj_a.weight", "ssm_alpha.weight"},  // Qwen3.5
        {"linear_attn.in_proj_b.weight", "ssm_beta.weight"},
        {"linear_attn.norm.weight", "ssm_norm.weight"},
        {"linear_attn.out_proj.weight", "ssm_out.weight"},
    });
    return mapped_name(name, per_layer);
}

// DeepSeek-V3.2's names (MODEL_TENSORS[DEEPSEEK32]): deepseek2's and the DSA indexer's.
const NameTable& deepseek32_layer_names() {
    static const NameTable per_layer = [] {
        NameTable names = deepseek2_layer_names();
        names.insert({
            {"self_attn.indexer.k_norm.weight", "indexer.k_norm.weight"},
            {"self_attn.indexer.k_norm.bias", "indexer.k_norm.bias"},
            {"self_attn.indexer.weights_proj.weight", "indexer.proj.weight"},
            {"self_attn.indexer.wk.weight", "indexer.attn_k.weight"},
            {"self_attn.indexer.wq_b.weight", "indexer.attn_q_b.weight"},
        });
        return names;
    }();
    return per_layer;
}
std::optional<std::string> deepseek32_tensor_name(const std::string& name) { return mapped_name(name, deepseek32_layer_names()); }

// DeepSeek-V4's names (DeepseekV4Model._map_dsv4_tensor_name, MODEL_TENSORS[DEEPSEEK4]): DeepSeek's
// own checkpoint names, without "model.", the hyper-connection, compressor and indexer tensors
// (some without ".weight" on disk) and the hash-routing table.
std::optional<std::string> deepseek4_tensor_name(const std::string& name) {
    static const NameTable root = {
        {"embed.weight", "token_embd.weight"},         {"norm.weight", "output_norm.weight"},
        {"head.weight", "output.weight"},              {"hc_head_fn", "output_hc_fn.weight"},
        {"hc_head_base", "output_hc_base.weight"},     {"hc_head_scale", "output_hc_scale.weight"},
    };
    static const NameTable per_layer = {
        {"hc_attn_fn", "hc_attn_fn.weight"},
        {"hc_attn_base", "hc_attn_base.weight"},
        {"hc_attn_scale", "hc_attn_scale.weight"},
        {"hc_ffn_fn", "hc_ffn_fn.weight"},
        {"hc_ffn_base", "hc_ffn_base.weight"},
        {"hc_ffn_scale", "hc_ffn_scale.weight"},
        {"attn.attn_sink", "attn_sinks.weight"},
        {"attn.wq_a.weight", "attn_q_a.weight"},
        {"attn.wq_b.weight", "attn_q_b.weight"},
        {"attn.q_norm.weight", "attn_q_a_norm.weight"},
        {"attn.wkv.weight", "attn_kv.weight"},
        {"attn.kv_norm.weight", "attn_kv_a_norm.weight"},
        {"attn.wo_a.weight", "attn_output_a.weight"},
        {"attn.wo_b.weight", "attn_output_b.weight"},
        {"attn.compressor.ape", "attn_compressor_ape.weight"},
        {"attn.compressor.wkv.weight", "attn_compressor_kv.weight"},
        {"attn.compressor.wgate.weight", "attn_compressor_gate.weight"},
        {"attn.compressor.norm.weight", "attn_compressor_norm.weight"},
        {"attn.indexer.wq_b.weight", "indexer.attn_q_b.weight"},
        {"attn.indexer.weights_proj.weight", "indexer.proj.weight"},
        {"attn.indexer.compressor.ape", "indexer_compressor_ape.weight"},
        {"attn.indexer.compressor.wkv.weight", "indexer_compressor_kv.weight"},
        {"attn.indexer.compressor.wgate.weight", "indexer_compressor_gate.weight"},
        {"attn.indexer.compressor.norm.weight", "indexer_compressor_norm.weight"},
        {"attn_norm.weight", "attn_norm.weight"},
        {"ffn_norm.weight", "ffn_norm.weight"},
        {"ffn.gate.weight", "ffn_gate_inp.weight"},
        {"ffn.gate.bias", "exp_probs_b.bias"},
        {"ffn.gate.tid2eid", "ffn_gate_tid2eid.weight"},
        {"ffn.shared_experts.w1.weight", "ffn_gate_shexp.weight"},
        {"ffn.shared_experts.w2.weight", "ffn_down_shexp.weight"},
        {"ffn.shared_experts.w3.weight", "ffn_up_shexp.weight"},
    };
    if (auto it = root.find(name); it != root.end()) return it->second;
    constexpr std::string_view prefix = "layers.";
    if (name.rfind(prefix, 0) != 0) return std::nullopt;
    const auto layer = layer_tensor("model." + name);
    if (!layer) return std::nullopt;
    const auto it = per_layer.find(layer->second);
    if (it == per_layer.end()) return std::nullopt;
    return "blk." + std::to_string(layer->first) + "." + it->second;
}

// gpt-oss's names (MODEL_TENSORS[GPT_OSS]): the norm before the MoE is post_attention_norm
// (ATTN_POST_NORM), the attention sinks a weight of their own, the router `mlp.router` with its
// bias, and the experts' biases beside the stacked experts (gate_up's split by gpt_oss_transforms).
std::optional<std::string> gpt_oss_tensor_name(const std::string& name) {
    static const NameTable per_layer = post_attention_norm_layer_names({
        {"self_attn.o_proj.bias", "attn_output.bias"},
        {"self_attn.sinks", "attn_sinks.weight"},
        {"mlp.router.weight", "ffn_gate_inp.weight"},
        {"mlp.router.bias", "ffn_gate_inp.bias"},
        {"mlp.experts.down_proj_bias", "ffn_down_exps.bias"},
    });
    return mapped_name(name, per_layer);
}

// gate_up_proj_bias [E, 2I]: the converter's [..., ::2] is the gate's, [..., 1::2] the up's.
std::vector<GgufTensorTransform> gpt_oss_transforms(const std::string& name, const std::vector<std::int64_t>& shape) {
    const auto layer = layer_tensor(name);
    if (!layer || layer->second != "mlp.experts.gate_up_proj_bias") return {};
    const std::string block = "blk." + std::to_string(layer->first) + ".";
    const std::int64_t width = shape.empty() ? 0 : shape.back();
    if (width % 2 != 0)
        throw Error(ErrorKind::input,
                    "has rows of " + std::to_string(width) + " values, which do not split into " + block + "ffn_gate_exps.bias and " + block +
                        "ffn_up_exps.bias",
                    {.tensor = name, .code = "BadGgufShape"});
    GgufTensorTransform gate{.gguf_name = block + "ffn_gate_exps.bias"}, up{.gguf_name = block + "ffn_up_exps.bias"};
    for (std::int64_t c = 0; c < width; c += 2) {
        gate.cols.push_back(c);
        up.cols.push_back(c + 1);
    }
    return {gate, up};
}

// A count or size from the config as GGUF's u32: Error(input) naming the key when it is negative
// or too large (a hostile config would otherwise wrap around into the file).
GgufValue config_u32(const ModelConfig& config, std::string_view key, std::int64_t value) {
    if (value < 0 || value > std::numeric_limits<std::uint32_t>::max())
        throw Error(ErrorKind::input, "has " + std::string(key) + " " + std::to_string(value) + ", not a count a GGUF u32 holds",
                    {.file = config.source(), .code = "InvalidConfig"});
    return GgufValue::u32(static_cast<std::uint32_t>(value));
}

GgufValue u32_of(const ModelConfig& config, std::string_view key) { return config_u32(config, key, config.require_int(key)); }

// ggml's expert gating functions (llama_expert_gating_func_type).
constexpr std::uint32_t gating_softmax = 1, gating_sigmoid = 2, gating_sqrtsoftplus = 4;

// Whether `kv` holds key `name`.
bool has_key(const std::vector<GgufKeyValue>& kv, const std::string& name) {
    return std::any_of(kv.begin(), kv.end(), [&](const GgufKeyValue& e) { return e.key == name; });
}

// Sets key `name` where it stands, or adds it at the end (gguf-py's writer overwrites a key a
// subclass writes again in place).
void set_key(std::vector<GgufKeyValue>& kv, const std::string& name, GgufValue value) {
    for (auto& entry : kv)
        if (entry.key == name) {
            entry.value = std::move(value);
            return;
        }
    kv.push_back({name, std::move(value)});
}

// The keys every llama.cpp text model gets from its HF config (TextModel.set_gguf_parameters),
// each only when the config has it. Among them the expert groups (n_group, topk_group), which
// llama.cpp reads for every architecture since 2025-10: without them DeepSeek-V3's
// group-limited routing would choose among all experts.
void add_text_model_keys(const std::string& arch, const ModelConfig& config, std::vector<GgufKeyValue>& kv) {
    auto add_u32 = [&](const char* key, const char* field) {
        if (config.find(field)) kv.push_back({arch + "." + key, u32_of(config, field)});
    };
    // find_hparam: the first of the fields the config has.
    auto add_first_u32 = [&](const char* key, std::initializer_list<const char*> fields) {
        for (const char* field : fields)
            if (config.find(field)) {
                add_u32(key, field);
                return;
            }
    };
    auto add_f32 = [&](const char* key, const char* field) {
        if (auto v = config.find(field); v && v->is_number()) kv.push_back({arch + "." + key, GgufValue::f32(static_cast<float>(v->as_double()))});
    };
    add_u32("block_count", "num_hidden_layers");
    add_first_u32("context_length", {"max_position_embeddings", "n_ctx", "n_positions", "max_length", "max_sequence_length", "model_max_length"});
    add_first_u32("embedding_length", {"hidden_size", "n_embd", "dim"});
    add_first_u32("feed_forward_length", {"prefix_dense_intermediate_size", "dense_intermediate_size", "intermediate_size", "n_inner", "hidden_dim"});
    add_first_u32("attention.head_count", {"num_attention_heads", "n_head", "n_heads"});
    add_first_u32("attention.head_count_kv", {"num_key_value_heads", "n_kv_heads"});
    add_rope_keys(arch, config, kv);
    add_f32("attention.layer_norm_rms_epsilon", "rms_norm_eps");
    for (const char* field : {"layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"})
        if (config.find(field)) {
            add_f32("attention.layer_norm_epsilon", field);
            break;
        }
    for (const char* field : {"num_local_experts", "num_experts", "n_routed_experts"})
        if (config.find(field)) {
            add_u32("expert_count", field);
            break;
        }
    for (const char* field : {"num_experts_per_tok", "num_experts_per_token", "top_k_experts"})
        if (config.find(field)) {
            add_u32("expert_used_count", field);
            break;
        }
    add_u32("expert_group_count", "n_group");
    add_u32("expert_group_used_count", "topk_group");
    for (const char* field : {"score_function", "scoring_func", "score_func", "moe_router_activation", "moe_router_activation_func", "expert_selection_fn"})
        if (auto v = config.find(field); v && v->is_string()) {
            const std::string scoring = v->as_string();
            const std::uint32_t gating = scoring == "sigmoid" ? gating_sigmoid : scoring == "softmax" ? gating_softmax : scoring == "sqrtsoftplus" ? gating_sqrtsoftplus : 0;
            if (!gating)
                throw Error(ErrorKind::input, "has " + std::string(field) + " '" + scoring + "', which llama.cpp's " + arch + " does not compute",
                            {.file = config.source(), .code = "UnsupportedGguf"});
            kv.push_back({arch + ".expert_gating_func", GgufValue::u32(gating)});
            break;
        }
    add_u32("attention.key_length", "head_dim");
    add_u32("attention.value_length", "head_dim");
}

// An architecture named `arch` with tokenizer pre-type `pre`, holding the text-model keys so far.
GgufArchitecture text_architecture(const std::string& arch, const std::string& pre, const ModelConfig& config) {
    GgufArchitecture a;
    a.arch = arch;
    a.pre = pre;
    add_text_model_keys(a.arch, config, a.metadata);
    return a;
}

// What llama-quantize's rules read of the model: its experts, query heads per KV head, layers.
GgufModelFacts model_facts(const ModelPlan& plan, const ModelConfig& config, std::int64_t kv_heads) {
    const std::int64_t heads = config.require_int("num_attention_heads");
    return {.n_expert = static_cast<int>(plan.num_experts), .n_gqa = static_cast<int>(kv_heads > 0 ? heads / kv_heads : 1),
            .n_layer = static_cast<int>(config.require_int("num_hidden_layers"))};
}
GgufModelFacts model_facts(const ModelPlan& plan, const ModelConfig& config) {
    return model_facts(plan, config, config.int_or("num_key_value_heads", config.require_int("num_attention_heads")));
}

// head_dim, or hidden_size / num_attention_heads where the config has none.
std::int64_t head_dim_of(const ModelConfig& config) {
    if (config.find("head_dim")) return config.require_int("head_dim");
    return config.require_int("hidden_size") / std::max<std::int64_t>(config.require_int("num_attention_heads"), 1);
}


GgufArchitecture qwen3moe(const ModelPlan& plan, const ModelConfig& config, const std::string& arch = "qwen3moe") {
    GgufArchitecture a = text_architecture(arch, "qwen2", config);
    a.metadata.push_back({a.arch + ".expert_feed_forward_length", u32_of(config, "moe_intermediate_size")});
    a.facts = model_facts(plan, config);
    a.tensor_name = qwen3moe_tensor_name;
    return a;
}

// Qwen3-VL-MoE's text model as llama.cpp's qwen3vlmoe (Qwen3VLMoeTextModel): qwen3moe's keys with
// the M-RoPE sections (rope.dimension_sections, which the loader requires) and n_deepstack_layers
// (vision_config's deepstack_visual_indexes: llama.cpp adds that many slices of a multimodal
// input embedding to the first layers; text tokens carry zeros there). `language_model.` is
// dropped and the vision tower left out (the converter's mmproj).
GgufArchitecture qwen3vlmoe(const ModelPlan& plan, const ModelConfig& config) {
    GgufArchitecture a = qwen3moe(plan, config, "qwen3vlmoe");
    if (!has_key(a.metadata, a.arch + ".rope.dimension_sections"))
        throw Error(ErrorKind::input, "has no rope mrope_section; llama.cpp's qwen3vlmoe needs the M-RoPE sections",
                    {.file = config.source(), .code = "UnsupportedGguf"});
    std::size_t deepstack = 0;
    if (auto indexes = config.root().get("vision_config"); indexes && indexes->is_object())
        if (auto list = indexes->get("deepstack_visual_indexes"); list && list->is_array()) deepstack = list->size();
    // llama.cpp adds a deepstack slice after the last layer's output rows are selected, which
    // aborts when that layer is a deepstack one (the released models have 3 of 48).
    if (static_cast<std::int64_t>(deepstack) >= config.require_int("num_hidden_layers"))
        throw Error(ErrorKind::input,
                    "has " + std::to_string(deepstack) + " deepstack_visual_indexes for " + std::to_string(config.require_int("num_hidden_layers")) +
                        " text layers; llama.cpp's qwen3vlmoe needs fewer than the layers",
                    {.file = config.source(), .code = "UnsupportedGguf"});
    a.metadata.push_back({a.arch + ".n_deepstack_layers", GgufValue::u32(static_cast<std::uint32_t>(deepstack))});
    return a;
}

GgufArchitecture deepseek2(const ModelPlan& plan, const ModelConfig& config, bool legacy_mla) {
    GgufArchitecture a = text_architecture("deepseek2", "deepseek-v3", config);
    auto& kv = a.metadata;
    auto key = [&](const char* name) { return a.arch + "." + name; };
    kv.push_back({key("leading_dense_block_count"), config_u32(config, "first_k_dense_replace", config.int_or("first_k_dense_replace", 0))});
    kv.push_back({key("vocab_size"), u32_of(config, "vocab_size")});
    if (auto q = config.find("q_lora_rank"); q && q->is_number()) kv.push_back({key("attention.q_lora_rank"), u32_of(config, "q_lora_rank")});
    kv.push_back({key("attention.kv_lora_rank"), u32_of(config, "kv_lora_rank")});
    const std::int64_t nope = config.require_int("qk_nope_head_dim"), rope = config.require_int("qk_rope_head_dim"),
                       v_head = config.require_int("v_head_dim"), kv_lora = config.require_int("kv_lora_rank");
    const std::int64_t heads = config.require_int("num_attention_heads");
    auto u32 = [&](std::int64_t v) { return config_u32(config, "a head size or count derived from it", v); };
    if (legacy_mla) {  // per-head K and V, as the converter wrote before its absorbed MLA (2025-04)
        set_key(kv, key("attention.key_length"), u32(nope + rope));
        set_key(kv, key("attention.value_length"), u32(v_head));
    } else {  // MQA over the compressed KV: one KV head of kv_lora (+ rope) values; the heads' own dims in *_mla
        set_key(kv, key("attention.head_count_kv"), u32(1));
        set_key(kv, key("attention.key_length"), u32(kv_lora + rope));
        set_key(kv, key("attention.value_length"), u32(kv_lora));
        kv.push_back({key("attention.key_length_mla"), u32(nope + rope)});
        kv.push_back({key("attention.value_length_mla"), u32(v_head)});
        a.mla_split = MlaShape{.heads = heads, .nope = nope, .v = v_head, .kv_lora = kv_lora};
    }
    kv.push_back({key("expert_feed_forward_length"), u32_of(config, "moe_intermediate_size")});
    set_key(kv, key("expert_count"), u32_of(config, "n_routed_experts"));
    kv.push_back({key("expert_shared_count"), config_u32(config, "n_shared_experts", config.int_or("n_shared_experts", 0))});
    // DeepseekV2Model writes the scale when the config has one, the norm only when true.
    if (auto scale = config.find("routed_scaling_factor"); scale && scale->is_number())
        kv.push_back({key("expert_weights_scale"), GgufValue::f32(static_cast<float>(scale->as_double()))});
    if (auto norm = config.find("norm_topk_prob"); norm && norm->is_bool() && norm->as_bool())
        kv.push_back({key("expert_weights_norm"), GgufValue::boolean(true)});
    // DeepseekV2Model writes it whatever the base found: softmax when the config names none.
    const std::string scoring = config.string_or("scoring_func", "softmax");
    set_key(kv, key("expert_gating_func"), GgufValue::u32(scoring == "sigmoid" ? gating_sigmoid : gating_softmax));
    kv.push_back({key("rope.dimension_count"), u32_of(config, "qk_rope_head_dim")});
    // The converter's legacy 0.1 x mscale_all_dim (TextModel wrote the yarn keys), which llama.cpp divides back.
    if (const auto mscale_all = rope_parameter(config, "mscale_all_dim"))
        kv.push_back({key("rope.scaling.yarn_log_multiplier"), GgufValue::f32(static_cast<float>(0.1 * *mscale_all))});
    a.facts = legacy_mla ? model_facts(plan, config) : model_facts(plan, config, 1);
    a.tensor_name = deepseek2_tensor_name;
    return a;
}

// DeepSeek-V3.2 as llama.cpp's deepseek32 (DeepseekV32Model): deepseek2's keys and its DSA
// lightning indexer's (head count, head dim, top-k). llama.cpp builds deepseek32 with the
// absorbed MLA only, so --legacy-mla is refused. The MTP layer is not written (no
// nextn_predict_layers: a model without one).
// llama.cpp's DSA indexer (deepseek32.cpp, glm-dsa.cpp at 82bb48500) takes each indexer head's
// non-rotary part at the offset of its own length: right only when the head is twice the rotary
// dimension, as in the released models. Another would be computed wrongly (or abort): refused.
void check_indexer_head(const ModelConfig& config, const std::string& arch, std::int64_t rotary) {
    const std::int64_t head = config.require_int("index_head_dim");
    if (head != 2 * rotary)
        throw Error(ErrorKind::input,
                    "has index_head_dim " + std::to_string(head) + " with a rotary dimension of " + std::to_string(rotary) + "; llama.cpp's " + arch +
                        " splits an indexer head correctly only when it is twice the rotary dimension (as the released models have it)",
                    {.file = config.source(), .code = "UnsupportedGguf"});
}

GgufArchitecture deepseek32(const ModelPlan& plan, const ModelConfig& config, bool legacy_mla) {
    const std::string arch = "deepseek32";
    if (legacy_mla)
        throw Error(ErrorKind::usage, "--legacy-mla: llama.cpp's " + arch + " loads only the absorbed MLA layout",
                    {.code = "UnsupportedGguf", .hint = "convert without --legacy-mla"});
    GgufArchitecture a = deepseek2(plan, config, false);
    a.arch = arch;
    for (auto& kv : a.metadata) kv.key = arch + kv.key.substr(kv.key.find('.'));
    a.metadata.push_back({arch + ".attention.indexer.head_count", u32_of(config, "index_n_heads")});
    a.metadata.push_back({arch + ".attention.indexer.key_length", u32_of(config, "index_head_dim")});
    a.metadata.push_back({arch + ".attention.indexer.top_k", u32_of(config, "index_topk")});
    a.tensor_name = deepseek32_tensor_name;
    return a;
}

// _set_vocab_glm's special tokens, named by their text: [gMASK] opens every prompt; <|user|> ends
// a turn (its <|endoftext|> would not stop).
const std::vector<std::pair<std::string, std::string>> glm_named_specials = {
    {"bos", "[gMASK]"}, {"eot", "<|user|>"}, {"unk", "<|endoftext|>"}, {"eom", "<|observation|>"}};

// GLM-5/5.1/5.2 as llama.cpp's glm-dsa (GlmMoeDsaModel): deepseek32's keys and tensors, the rotary
// dimension qk_rope_head_dim x partial_rotary_factor, the indexer_types (full or shared, per layer)
// when the config has them, GLM's vocabulary. The MTP layer is not written.
GgufArchitecture glm_dsa(const ModelPlan& plan, const ModelConfig& config, bool legacy_mla) {
    const double partial = rope_parameter(config, "partial_rotary_factor").value_or(1.0);
    const auto rotary = static_cast<std::int64_t>(static_cast<double>(config.require_int("qk_rope_head_dim")) * partial);
    check_indexer_head(config, "glm-dsa", rotary);
    GgufArchitecture a = deepseek32(plan, config, legacy_mla);
    a.arch = "glm-dsa";
    for (auto& kv : a.metadata) kv.key = a.arch + kv.key.substr(kv.key.find('.'));
    a.pre = "glm4";
    set_key(a.metadata, a.arch + ".rope.dimension_count", GgufValue::u32(static_cast<std::uint32_t>(rotary)));
    if (auto types = config.find("indexer_types"); types && types->is_array()) {
        std::vector<std::uint8_t> full;
        for (std::size_t i = 0; i < types->size(); ++i) full.push_back(types->at(i).is_string() && types->at(i).as_string() == "full");
        a.metadata.push_back({a.arch + ".attention.indexer.types", GgufValue::booleans(full)});
    }
    a.named_specials = glm_named_specials;
    return a;
}

// GLM-4.5/4.6/4.7 as llama.cpp's glm4moe (Glm4MoeModel): the text-model keys, the partial rotary
// dimension, DeepSeek-style MoE keys with sigmoid gating, GLM's named special tokens. The MTP
// layer is not written: block_count is num_hidden_layers and nextn_predict_layers is left out,
// which llama.cpp reads as a model without one (the converter writes it, unused but for drafts).
GgufArchitecture glm4moe(const ModelPlan& plan, const ModelConfig& config) {
    GgufArchitecture a = text_architecture("glm4moe", "glm4", config);
    auto& kv = a.metadata;
    auto key = [&](const char* name) { return a.arch + "." + name; };
    const double partial = rope_parameter(config, "partial_rotary_factor").value_or(0.5);
    kv.push_back({key("rope.dimension_count"), GgufValue::u32(static_cast<std::uint32_t>(static_cast<double>(head_dim_of(config)) * partial))});
    auto add_u32 = [&](const char* name, const char* field) {
        if (auto v = config.find(field); v && v->is_number()) kv.push_back({key(name), u32_of(config, field)});
    };
    add_u32("expert_feed_forward_length", "moe_intermediate_size");
    add_u32("expert_shared_count", "n_shared_experts");
    add_u32("leading_dense_block_count", "first_k_dense_replace");
    set_key(kv, key("expert_gating_func"), GgufValue::u32(gating_sigmoid));  // whatever the config says
    if (auto v = config.find("routed_scaling_factor"); v && v->is_number())
        kv.push_back({key("expert_weights_scale"), GgufValue::f32(static_cast<float>(v->as_double()))});
    if (auto v = config.find("norm_topk_prob"); v && v->is_bool()) kv.push_back({key("expert_weights_norm"), GgufValue::boolean(v->as_bool())});
    a.named_specials = glm_named_specials;
    a.facts = model_facts(plan, config);
    a.tensor_name = glm4moe_tensor_name;
    return a;
}

// MiniMax-M2/M2.1/M2.5/M2.7 as llama.cpp's minimax-m2 (MiniMaxM2Model): the text-model keys
// (sigmoid gating from scoring_func), intermediate_size as the experts' length, rotary_dim as
// the rotary dimension (llama.cpp rotates it NeoX-style: rows as stored). The MTP modules are not
// written, as the converter does not write them.
GgufArchitecture minimax_m2(const ModelPlan& plan, const ModelConfig& config, const std::string& arch = "minimax-m2") {
    GgufArchitecture a = text_architecture(arch, "minimax-m2", config);
    auto& kv = a.metadata;
    kv.push_back({a.arch + ".expert_feed_forward_length", u32_of(config, "intermediate_size")});
    kv.push_back({a.arch + ".rope.dimension_count", u32_of(config, "rotary_dim")});
    a.facts = model_facts(plan, config);
    a.tensor_name = minimax_m2_tensor_name;
    return a;
}

// What llama.cpp's minimax-m3 (src/models/minimax-m3.cpp at 82bb48500) computes whatever the
// config says; a config that says otherwise would run as another model, or not load. Returns
// the leading dense layers.
std::int64_t check_minimax_m3(const ModelConfig& config) {
    auto refuse = [&](const std::string& what) {
        throw Error(ErrorKind::input, what, {.file = config.source(), .code = "UnsupportedGguf"});
    };
    const std::int64_t layers = config.require_int("num_hidden_layers");
    // moe_layer_freq: dense layers first, then MoE (leading_dense_block_count is all it reads).
    std::int64_t dense = 0;
    if (auto freq = config.find("moe_layer_freq"); freq && freq->is_array()) {
        while (dense < layers && freq->at(static_cast<std::size_t>(dense)).as_double() == 0) ++dense;
        for (std::int64_t l = dense; l < layers; ++l)
            if (freq->at(static_cast<std::size_t>(l)).as_double() == 0)
                refuse("has a dense layer " + std::to_string(l) + " after MoE layers (moe_layer_freq); llama.cpp's minimax-m3 runs dense layers only first");
    }
    // Every MLP is swigluoai with gpt-oss's constants (llama-graph.cpp's LLM_FFN_SWIGLU_OAI_MOE).
    if (const std::string act = config.string_or("hidden_act", "swigluoai"); act != "swigluoai")
        refuse("has hidden_act '" + act + "'; llama.cpp's minimax-m3 computes swigluoai");
    struct Constant {
        const char* field;
        float value;
        const char* text;
    };
    for (const Constant c : {Constant{"swiglu_alpha", 1.702f, "1.702"}, Constant{"swiglu_limit", 7.0f, "7"}})
        if (auto v = config.find(c.field); v && v->is_number() && static_cast<float>(v->as_double()) != c.value)
            refuse("has " + std::string(c.field) + " " + v->to_json() + "; llama.cpp's minimax-m3 computes swigluoai with " + c.field + " " +
                   c.text);
    // The converter adds 1 to every norm whatever the config says.
    if (auto gemma = config.find("use_gemma_norm"); !gemma || !gemma->is_bool() || !gemma->as_bool())
        refuse("does not set use_gemma_norm; llama.cpp's converter bakes Gemma's (1 + w) into every norm of minimax-m3");
    // The shared expert is n_shared_experts x the experts' length to the loader.
    const std::int64_t shared = config.int_or("n_shared_experts", 0);
    if (shared < 1 || config.int_or("shared_intermediate_size", 0) != config.require_int("intermediate_size"))
        refuse("has " + std::to_string(shared) + " shared experts of shared_intermediate_size " +
               std::to_string(config.int_or("shared_intermediate_size", 0)) +
               "; llama.cpp's minimax-m3 loads one or more shared experts of the routed experts' intermediate_size");
    // MiniMax Sparse Attention in every MoE layer: one indexer head per KV head, the top-k of
    // max-pooled block scores plus the local blocks, no leading blocks forced in.
    const auto sparse = config.find("sparse_attention_config");
    if (!sparse || !sparse->is_object()) refuse("has no sparse_attention_config; llama.cpp's minimax-m3 runs MiniMax Sparse Attention");
    auto sparse_value = [&](const char* key) {
        auto v = sparse->get(key);
        if (!v) refuse("has no sparse_attention_config." + std::string(key) + ", which llama.cpp's minimax-m3 reads");
        return *v;
    };
    if (auto on = sparse->get("use_sparse_attention"); on && on->is_bool() && !on->as_bool())
        refuse("turns sparse attention off; llama.cpp's minimax-m3 runs MiniMax Sparse Attention in every MoE layer");
    if (auto init = sparse->get("sparse_init_block"); init && init->is_number() && init->as_double() != 0)
        refuse("forces " + init->to_json() + " leading blocks into sparse attention (sparse_init_block); llama.cpp's minimax-m3 forces none");
    if (auto score = sparse->get("sparse_score_type"); score && score->is_string() && score->as_string() != "max")
        refuse("scores sparse-attention blocks by '" + score->as_string() + "'; llama.cpp's minimax-m3 takes their maximum");
    if (auto freq = sparse->get("sparse_attention_freq"); freq && freq->is_array())
        for (std::int64_t l = 0; l < layers && static_cast<std::size_t>(l) < freq->size(); ++l)
            if ((freq->at(static_cast<std::size_t>(l)).as_double() != 0) != (l >= dense))
                refuse("has sparse_attention_freq " + freq->at(static_cast<std::size_t>(l)).to_json() + " at layer " + std::to_string(l) +
                       "; llama.cpp's minimax-m3 runs sparse attention exactly in the MoE layers");
    const std::int64_t index_heads = sparse_value("sparse_num_index_heads").as_int();
    const std::int64_t kv_heads = config.require_int("num_key_value_heads");
    if (index_heads != kv_heads)
        refuse("has " + std::to_string(index_heads) + " sparse-attention index heads for " + std::to_string(kv_heads) +
               " key-value heads; llama.cpp's minimax-m3 needs one per key-value head");
    for (const char* key : {"sparse_index_dim", "sparse_topk_blocks", "sparse_block_size", "sparse_local_block"}) sparse_value(key);
    return dense;
}

// MiniMax-M3 as llama.cpp's minimax-m3 (MiniMaxM3Model): M2's keys with dense_intermediate_size as
// feed_forward_length (the dense layers'), then the shared expert, the routed scaling, MiniMax
// Sparse Attention's indexer and the leading dense layers; the Gemma norms + 1 (its transforms),
// the indexer's projections kept F32. No MTP modules (the release has none on disk).
GgufArchitecture minimax_m3(const ModelPlan& plan, const ModelConfig& config) {
    const std::int64_t dense = check_minimax_m3(config);
    GgufArchitecture a = minimax_m2(plan, config, "minimax-m3");
    auto& kv = a.metadata;
    auto key = [&](const char* name) { return a.arch + "." + name; };
    auto u32 = [&](std::int64_t v) { return config_u32(config, "a head size or count derived from it", v); };
    kv.push_back({key("expert_shared_count"), u32_of(config, "n_shared_experts")});
    kv.push_back({key("expert_weights_scale"), GgufValue::f32(static_cast<float>(config.require("routed_scaling_factor").as_double()))});
    kv.push_back({key("expert_weights_norm"), GgufValue::boolean(true)});
    kv.push_back({key("attention.indexer.head_count"), u32_of(config, "sparse_attention_config.sparse_num_index_heads")});
    kv.push_back({key("attention.indexer.key_length"), u32_of(config, "sparse_attention_config.sparse_index_dim")});
    kv.push_back({key("attention.indexer.top_k"), u32_of(config, "sparse_attention_config.sparse_topk_blocks")});
    kv.push_back({key("attention.indexer.block_size"), u32_of(config, "sparse_attention_config.sparse_block_size")});
    kv.push_back({key("attention.indexer.local_blocks"), u32_of(config, "sparse_attention_config.sparse_local_block")});
    kv.push_back({key("leading_dense_block_count"), u32(dense)});
    a.tensor_name = minimax_m3_tensor_name;
    a.transforms = minimax_m3_transforms;
    return a;
}

// The gated delta-net's dimensions (linear_* in the config); Qwen3.5's value heads go in tiled order.
struct DeltaNetShape {
    std::int64_t k_heads = 0, v_heads = 0, k_dim = 0, v_dim = 0;
    bool tiled_v = false;
};

// _LinearAttentionVReorderBase._reorder_v_heads: indices `offset`.. of value heads stored grouped by
// key head ([k_heads][v_heads / k_heads][width]) in tiled order ([v_heads / k_heads][k_heads][width]),
// as ggml broadcasts them.
std::vector<std::int64_t> tiled_value_heads(const DeltaNetShape& d, std::int64_t width, std::int64_t offset = 0) {
    const std::int64_t per_k = d.v_heads / d.k_heads;
    std::vector<std::int64_t> order;
    for (std::int64_t j = 0; j < per_k; ++j)
        for (std::int64_t g = 0; g < d.k_heads; ++g)
            for (std::int64_t w = 0; w < width; ++w) order.push_back(offset + (g * per_k + j) * width + w);
    return order;
}

// Qwen3.5's delta-net tensors: in_proj_qkv (its v rows), in_proj_z, in_proj_a/b, conv1d (its v
// channels), A_log / dt_bias (their elements), out_proj (its columns) with the value heads tiled.
std::vector<GgufTensorTransform> qwen35_delta_net(const DeltaNetShape& d, const std::string& blk, const std::string& rest,
                                                  const std::string& name, const std::vector<std::int64_t>& shape) {
    using Values = GgufTensorTransform::Values;
    const std::int64_t qk = 2 * d.k_heads * d.k_dim, v = d.v_heads * d.v_dim;
    auto expect = [&](std::int64_t dim, std::int64_t want, const char* what) {
        const std::int64_t have = dim < static_cast<std::int64_t>(shape.size()) ? shape[static_cast<std::size_t>(dim)] : 0;
        if (have != want)
            throw Error(ErrorKind::input, "has " + std::to_string(have) + " " + what + "; Qwen3.5's gated delta-net needs " + std::to_string(want) +
                                              " from linear_num_key_heads/value_heads and their head dims",
                        {.tensor = name, .code = "ShapeMismatch"});
    };
    auto concat = [](std::vector<std::int64_t> a, const std::vector<std::int64_t>& b) {
        a.insert(a.end(), b.begin(), b.end());
        return a;
    };
    std::vector<std::int64_t> qk_rows(static_cast<std::size_t>(qk));
    for (std::int64_t i = 0; i < qk; ++i) qk_rows[static_cast<std::size_t>(i)] = i;
    if (rest == "linear_attn.in_proj_qkv.weight") {
        expect(0, qk + v, "rows");
        return {{.gguf_name = blk + "attn_qkv.weight", .rows = concat(qk_rows, tiled_value_heads(d, d.v_dim, qk))}};
    }
    if (rest == "linear_attn.in_proj_z.weight") {
        expect(0, v, "rows");
        return {{.gguf_name = blk + "attn_gate.weight", .rows = tiled_value_heads(d, d.v_dim)}};
    }
    if (rest == "linear_attn.in_proj_a.weight" || rest == "linear_attn.in_proj_b.weight") {
        expect(0, d.v_heads, "rows");
        return {{.gguf_name = blk + (rest == "linear_attn.in_proj_a.weight" ? "ssm_alpha.weight" : "ssm_beta.weight"), .rows = tiled_value_heads(d, 1)}};
    }
    if (rest == "linear_attn.A_log" || rest == "linear_attn.dt_bias") {
        expect(0, d.v_heads, "values");
        const bool a_log = rest == "linear_attn.A_log";
        return {{.gguf_name = blk + (a_log ? "ssm_a" : "ssm_dt.bias"), .cols = tiled_value_heads(d, 1),
                 .values = a_log ? Values::negative_exp : Values::as_stored}};
    }
    if (rest == "linear_attn.conv1d.weight") {
        expect(0, qk + v, "channels");
        return {{.gguf_name = blk + "ssm_conv1d.weight", .rows = concat(qk_rows, tiled_value_heads(d, d.v_dim, qk)), .squeeze = true}};
    }
    if (rest == "linear_attn.out_proj.weight") {
        expect(1, v, "columns");
        return {{.gguf_name = blk + "ssm_out.weight", .cols = tiled_value_heads(d, d.v_dim)}};
    }
    return {};
}

// What Qwen3NextModel.modify_tensors does beyond renaming, for `name` of `shape`:
// - in_proj_qkvz, stored per key head as [q, k, v, z] (v and z: v_heads / k_heads value heads),
//   becomes attn_qkv (every head's q rows, then k, then v) and attn_gate (every head's z rows);
// - A_log becomes ssm_a = -exp(A_log); dt_bias becomes ssm_dt.bias; conv1d [C, 1, K] becomes
//   ssm_conv1d [C, K];
// - every *norm.weight but the delta-net's own linear_attn.norm gets + 1 (Qwen3-Next's RMSNorm
//   scales by 1 + weight).
std::vector<GgufTensorTransform> qwen3next_transforms(const DeltaNetShape& d, const std::string& checkpoint_name,
                                                     const std::vector<std::int64_t>& shape) {
    const std::string name = text_model_name(checkpoint_name);
    const auto layer = layer_tensor(name);
    using Values = GgufTensorTransform::Values;
    if (layer) {
        const std::string blk = "blk." + std::to_string(layer->first) + ".";
        const std::string& rest = layer->second;
        if (d.tiled_v)
            if (auto made = qwen35_delta_net(d, blk, rest, name, shape); !made.empty()) return made;
        if (rest == "linear_attn.in_proj_qkvz.weight") {
            const std::int64_t per_k = d.v_heads / d.k_heads * d.v_dim, group = 2 * d.k_dim + 2 * per_k;
            if (shape.size() != 2 || shape[0] != d.k_heads * group)
                throw Error(ErrorKind::input,
                            "has " + std::to_string(shape.empty() ? 0 : shape[0]) + " rows; Qwen3-Next's in_proj_qkvz needs linear_num_key_heads x (2 x " +
                                "linear_key_head_dim + 2 x linear_value_head_dim x value heads per key head) = " + std::to_string(d.k_heads * group),
                            {.tensor = name, .code = "ShapeMismatch"});
            GgufTensorTransform qkv{.gguf_name = blk + "attn_qkv.weight"}, gate{.gguf_name = blk + "attn_gate.weight"};
            auto take = [&](std::vector<std::int64_t>& rows, std::int64_t offset, std::int64_t count) {
                for (std::int64_t h = 0; h < d.k_heads; ++h)
                    for (std::int64_t r = 0; r < count; ++r) rows.push_back(h * group + offset + r);
            };
            take(qkv.rows, 0, d.k_dim);                  // q
            take(qkv.rows, d.k_dim, d.k_dim);            // k
            take(qkv.rows, 2 * d.k_dim, per_k);          // v
            take(gate.rows, 2 * d.k_dim + per_k, per_k);  // z
            return {qkv, gate};
        }
        if (rest == "linear_attn.A_log") return {{.gguf_name = blk + "ssm_a", .values = Values::negative_exp}};
        if (rest == "linear_attn.dt_bias") return {{.gguf_name = blk + "ssm_dt.bias"}};
        if (rest == "linear_attn.conv1d.weight") return {{.gguf_name = blk + "ssm_conv1d.weight", .squeeze = true}};
    }
    if (name.ends_with("norm.weight") && !name.ends_with("linear_attn.norm.weight"))
        if (auto gguf = qwen3next_tensor_name(name)) return {{.gguf_name = *gguf, .values = Values::plus_one}};
    return {};
}

// Qwen3-Next as llama.cpp's qwen3next (Qwen3NextModel): Qwen2-MoE's keys (the experts' and the
// shared expert's lengths), the gated delta-net's (ssm.*: conv kernel, key head dim as the state
// size, key heads as groups, value heads as the time-step rank, value dims as the inner size),
// the full-attention interval and the partial rotary dimension. The MTP layer is not written
// (block_count is num_hidden_layers, no nextn_predict_layers: a model without one to llama.cpp).
GgufArchitecture qwen3next(const ModelPlan& plan, const ModelConfig& config, bool qwen35 = false) {
    GgufArchitecture a = text_architecture(qwen35 ? "qwen35moe" : "qwen3next", "qwen2", config);
    auto& kv = a.metadata;
    auto key = [&](const char* name) { return a.arch + "." + name; };
    kv.push_back({key("expert_feed_forward_length"), u32_of(config, "moe_intermediate_size")});
    if (config.find("shared_expert_intermediate_size"))
        kv.push_back({key("expert_shared_feed_forward_length"), u32_of(config, "shared_expert_intermediate_size")});
    const DeltaNetShape d{.k_heads = config.require_int("linear_num_key_heads"), .v_heads = config.require_int("linear_num_value_heads"),
                          .k_dim = config.require_int("linear_key_head_dim"), .v_dim = config.require_int("linear_value_head_dim"),
                          .tiled_v = qwen35};
    if (d.k_heads <= 0 || d.v_heads <= 0 || d.k_dim <= 0 || d.v_dim <= 0 || d.v_heads % d.k_heads != 0)
        throw Error(ErrorKind::input, "has linear_num_value_heads " + std::to_string(d.v_heads) + " not a positive multiple of linear_num_key_heads " +
                                          std::to_string(d.k_heads) + " (or a non-positive head dim)",
                    {.file = config.source(), .code = "InvalidConfig"});
    auto u32 = [&](std::int64_t v) { return config_u32(config, "a head size or count derived from it", v); };
    kv.push_back({key("ssm.conv_kernel"), u32_of(config, "linear_conv_kernel_dim")});
    kv.push_back({key("ssm.state_size"), u32(d.k_dim)});
    kv.push_back({key("ssm.group_count"), u32(d.k_heads)});
    kv.push_back({key("ssm.time_step_rank"), u32(d.v_heads)});
    kv.push_back({key("ssm.inner_size"), u32(d.v_dim * d.v_heads)});
    kv.push_back({key("full_attention_interval"), config_u32(config, "full_attention_interval", config.int_or("full_attention_interval", 4))});
    const double partial = rope_parameter(config, "partial_rotary_factor").value_or(0.25);
    kv.push_back({key("rope.dimension_count"), u32(static_cast<std::int64_t>(static_cast<double>(head_dim_of(config)) * partial))});
    // _Qwen35MRopeMixin: llama.cpp's qwen35moe requires the M-RoPE sections; Qwen3.5's default.
    if (qwen35 && !has_key(kv, key("rope.dimension_sections")))
        kv.push_back({key("rope.dimension_sections"), GgufValue::i32s({11, 11, 10, 0})});
    a.facts = model_facts(plan, config);
    a.tensor_name = qwen3next_tensor_name;
    a.transforms = [d](const std::string& name, const std::vector<std::int64_t>& shape) { return qwen3next_transforms(d, name, shape); };
    return a;
}

// What llama.cpp's deepseek4 (src/models/deepseek4.cpp at 82bb48500) loads and computes; another
// config would not load, or run as another model.
void check_deepseek4(const ModelConfig& config) {
    auto refuse = [&](const std::string& what) {
        throw Error(ErrorKind::input, what, {.file = config.source(), .code = "UnsupportedGguf"});
    };
    if (const std::string scoring = config.string_or("scoring_func", ""); scoring != "sqrtsoftplus")
        refuse("has scoring_func '" + scoring + "'; llama.cpp's deepseek4 routes by sqrtsoftplus only");
    if (config.require_int("hc_mult") != 4) refuse("has hc_mult " + std::to_string(config.require_int("hc_mult")) + "; llama.cpp's deepseek4 mixes 4 hyper-connection streams");
    const std::int64_t heads = config.require_int("num_attention_heads"), groups = config.require_int("o_groups");
    if (groups < 1 || heads % groups != 0)
        refuse("has " + std::to_string(heads) + " heads in " + std::to_string(groups) + " output groups (o_groups); llama.cpp's deepseek4 needs whole groups");
    const std::int64_t layers = config.require_int("num_hidden_layers");
    const auto ratios = config.require("compress_ratios");
    if (!ratios.is_array() || static_cast<std::int64_t>(ratios.size()) < layers)
        refuse("has compress_ratios with fewer entries than num_hidden_layers " + std::to_string(layers));
    for (std::size_t i = 0; i < ratios.size(); ++i) {
        const ConfigValue r = ratios.at(i);
        if (!r.is_number() || (r.as_double() != 0 && r.as_double() != 4 && r.as_double() != 128))
            refuse("has compress_ratios entry " + std::to_string(i) + " = " + r.to_json() + "; llama.cpp's deepseek4 compresses by 0, 4 or 128");
    }
    // The indexer's keys go through a Hadamard rotation of a power of two of at least 64 values.
    const std::int64_t index_dim = config.require_int("index_head_dim");
    if (index_dim < 64 || (index_dim & (index_dim - 1)) != 0)
        refuse("has index_head_dim " + std::to_string(index_dim) + "; llama.cpp's deepseek4 rotates indexer heads of a power of two of 64 or more values");
    if (!config.require("swiglu_limit").is_number()) refuse("has no numeric swiglu_limit, which llama.cpp's deepseek4 clamps by");
    // Its graph asserts that the rotary part fits the attention and indexer heads.
    const std::int64_t rope = config.require_int("qk_rope_head_dim"), head = config.require_int("head_dim");
    if (rope > head || rope > index_dim)
        refuse("has qk_rope_head_dim " + std::to_string(rope) + " beyond head_dim " + std::to_string(head) + " or index_head_dim " +
               std::to_string(index_dim) + "; llama.cpp's deepseek4 rotates part of each head");
    // Its loader reads a hash-routing table in every layer below num_hash_layers.
    if (const std::int64_t hashed = config.require_int("num_hash_layers"); hashed < 0 || hashed > layers)
        refuse("has num_hash_layers " + std::to_string(hashed) + " for " + std::to_string(layers) + " layers");
}

// DeepSeek-V4 as llama.cpp's deepseek4 (DeepseekV4Model): the text-model keys (sqrtsoftplus gating,
// yarn rope keys), then its own — the rotary dimension, q_lora_rank, the sliding window, the
// experts' and shared expert's keys, the swiglu clamp per layer for routed and shared experts
// (as float arrays), the indexer's, the grouped low-rank output, the compression ratios and their
// rope base, the hyper-connections, the hash-routed layers and embedding_length_out (hidden x
// hc_mult). The tensors keep the types the checkpoint stores (types_follow_source); the MXFP4
// experts are carried as stored (the float presets: file type MXFP4_MOE, as the converter's).
// The MTP block is not written, as the converter's default does not.
GgufArchitecture deepseek4(const ModelPlan& plan, const ModelConfig& config) {
    check_deepseek4(config);
    GgufArchitecture a = text_architecture("deepseek4", "deepseek-v3", config);
    auto& kv = a.metadata;
    auto key = [&](const char* name) { return a.arch + "." + name; };
    auto f32 = [&](const char* field) { return GgufValue::f32(static_cast<float>(config.require(field).as_double())); };
    const auto layers = static_cast<std::size_t>(config.require_int("num_hidden_layers"));
    kv.push_back({key("rope.dimension_count"), u32_of(config, "qk_rope_head_dim")});
    kv.push_back({key("attention.q_lora_rank"), u32_of(config, "q_lora_rank")});
    kv.push_back({key("attention.sliding_window"), u32_of(config, "sliding_window")});
    kv.push_back({key("expert_feed_forward_length"), u32_of(config, "moe_intermediate_size")});
    kv.push_back({key("expert_shared_count"), u32_of(config, "n_shared_experts")});
    kv.push_back({key("expert_weights_scale"), f32("routed_scaling_factor")});
    kv.push_back({key("expert_weights_norm"), GgufValue::boolean(config.require("norm_topk_prob").as_bool())});
    const std::vector<float> clamp(layers, static_cast<float>(config.require("swiglu_limit").as_double()));
    kv.push_back({key("swiglu_clamp_exp"), GgufValue::f32s(clamp)});
    kv.push_back({key("swiglu_clamp_shexp"), GgufValue::f32s(clamp)});
    kv.push_back({key("attention.indexer.head_count"), u32_of(config, "index_n_heads")});
    kv.push_back({key("attention.indexer.key_length"), u32_of(config, "index_head_dim")});
    kv.push_back({key("attention.indexer.top_k"), u32_of(config, "index_topk")});
    kv.push_back({key("attention.output_group_count"), u32_of(config, "o_groups")});
    kv.push_back({key("attention.output_lora_rank"), u32_of(config, "o_lora_rank")});
    std::vector<std::int32_t> ratios;
    for (const std::int64_t r : config.require("compress_ratios").as_int_array()) ratios.push_back(static_cast<std::int32_t>(r));
    kv.push_back({key("attention.compress_ratios"), GgufValue::i32s(ratios)});
    kv.push_back({key("attention.compress_rope_freq_base"), f32("compress_rope_theta")});
    kv.push_back({key("hyper_connection.count"), u32_of(config, "hc_mult")});
    kv.push_back({key("hyper_connection.sinkhorn_iterations"), u32_of(config, "hc_sinkhorn_iters")});
    kv.push_back({key("hyper_connection.epsilon"), f32("hc_eps")});
    kv.push_back({key("hash_layer_count"), u32_of(config, "num_hash_layers")});
    kv.push_back({key("embedding_length_out"),
                  config_u32(config, "hidden_size x hc_mult", config.require_int("hidden_size") * config.require_int("hc_mult"))});
    a.facts = model_facts(plan, config);
    a.tensor_name = deepseek4_tensor_name;
    a.types_follow_source = true;
    for (std::int64_t l = 0; l < config.require_int("num_hash_layers"); ++l)
        a.required_tensors.push_back("blk." + std::to_string(l) + ".ffn_gate_tid2eid.weight");
    return a;
}

// gpt-oss as llama.cpp's gpt-oss (GptOssModel): the text-model keys (its yarn keys among them,
// gguf_rope_keys), sliding_window, intermediate_size as the experts' length;
// the sliding-window pattern is not written (llama.cpp's default: every other layer from layer 0),
// so a config whose layer_types say otherwise is refused.
GgufArchitecture gpt_oss(const ModelPlan& plan, const ModelConfig& config) {
    GgufArchitecture a = text_architecture("gpt-oss", "gpt-4o", config);
    auto& kv = a.metadata;
    kv.push_back({a.arch + ".attention.sliding_window", u32_of(config, "sliding_window")});
    kv.push_back({a.arch + ".expert_feed_forward_length", u32_of(config, "intermediate_size")});
    if (auto types = config.find("layer_types"); types && types->is_array())
        for (std::size_t l = 0; l < types->size(); ++l) {
            const ConfigValue type = types->at(l);
            const std::string expected = l % 2 == 0 ? "sliding_attention" : "full_attention";
            if (!type.is_string() || type.as_string() != expected)
                throw Error(ErrorKind::input,
                            "has layer_types[" + std::to_string(l) + "] other than '" + expected +
                                "'; llama.cpp's gpt-oss slides the window on the even layers and attends fully on the odd ones",
                            {.file = config.source(), .code = "UnsupportedGguf"});
        }
    a.facts = model_facts(plan, config);
    a.tensor_name = gpt_oss_tensor_name;
    a.transforms = gpt_oss_transforms;
    return a;
}

// Mixtral as llama.cpp's llama (LlamaModel, which registers MixtralForCausalLM): the text-model
// keys, vocab_size, rope.dimension_count, linear rope scaling, the Q/K row interleave and the
// SentencePiece ("llama") vocabulary.
GgufArchitecture llama(const ModelPlan& plan, const ModelConfig& config) {
    GgufArchitecture a = text_architecture("llama", "default", config);
    a.vocabulary = GgufArchitecture::Vocabulary::llama;
    auto& kv = a.metadata;
    auto key = [&](const char* name) { return a.arch + "." + name; };
    kv.push_back({key("vocab_size"), u32_of(config, "vocab_size")});
    const std::int64_t heads = config.require_int("num_attention_heads");
    kv.push_back({key("rope.dimension_count"), GgufValue::u32(static_cast<std::uint32_t>(head_dim_of(config)))});
    // llama.cpp's llama attends over the whole context: a window shorter than it would be dropped.
    if (auto window = config.find("sliding_window"); window && window->is_number() &&
                                                     window->as_int() < config.int_or("max_position_embeddings", 0))
        throw Error(ErrorKind::input,
                    "has sliding_window " + std::to_string(window->as_int()) +
                        ", shorter than max_position_embeddings; llama.cpp's llama attends over the whole context",
                    {.file = config.source(), .code = "UnsupportedGguf"});
    a.rope_interleave_q_heads = heads;
    a.rope_interleave_k_heads = config.int_or("num_key_value_heads", heads);
    a.facts = model_facts(plan, config);
    a.tensor_name = llama_tensor_name;
    return a;
}

}  // namespace

bool gguf_skips_multimodal(const std::string& name) {
    // TextModel.filter_tensors' list (the converter writes these to an mmproj file of their own).
    static constexpr std::string_view prefixes[] = {"mlp", "vit.", "vpm.", "siglip2.", "conformer.", "merger.", "resampler.",
                                                    "sound_encoder.", "sound_projection.", "speech_embeddings."};
    static constexpr std::string_view parts[] = {"visual.", "vision.", "audio.", "talker.", "vision_", "audio_", "token2wav.", "code2wav.",
                                                 "projector.", "pre_mm_projector_norm", "image_newline", "view_seperator", "patch_embed",
                                                 "patch_embedding", "patch_merger.", "patch_merge_mlp.", "model.connector."};
    for (std::string_view p : prefixes)
        if (name.starts_with(p)) return true;
    for (std::string_view p : parts)
        if (name.find(p) != std::string::npos) return true;
    return false;
}

std::int64_t gguf_rope_interleave_heads(const GgufArchitecture& arch, const std::string& gguf_name) {
    auto is = [&](std::string_view tensor) {
        return gguf_name.rfind("blk.", 0) == 0 &&
               (gguf_name.ends_with(std::string(tensor) + ".weight") || gguf_name.ends_with(std::string(tensor) + ".bias"));
    };
    if (is(".attn_q")) return arch.rope_interleave_q_heads;
    if (is(".attn_k")) return arch.rope_interleave_k_heads;
    return 0;
}

GgufArchitecture gguf_architecture_for(const ModelPlan& plan, const ModelConfig& config, const GgufArchitectureRequest& request) {
    if (plan.model_type == "qwen3_moe") return qwen3moe(plan, config);
    if (plan.model_type == "qwen3_vl_moe" || plan.model_type == "qwen3_vl_moe_text") return qwen3vlmoe(plan, config);
    if (plan.model_type == "deepseek_v3" || plan.model_type == "deepseek_v2") return deepseek2(plan, config, request.legacy_mla);
    if (plan.model_type == "deepseek_v32") {
        check_indexer_head(config, "deepseek32", config.require_int("qk_rope_head_dim"));
        return deepseek32(plan, config, request.legacy_mla);
    }
    if (plan.model_type == "glm_moe_dsa") return glm_dsa(plan, config, request.legacy_mla);
    if (plan.model_type == "kimi_k2") {  // Kimi-K2/K2.5/K2.6: DeepSeek-V3's model, its own tokenizer
        GgufArchitecture a = deepseek2(plan, config, request.legacy_mla);
        a.pre = "kimi-k2";
        a.tiktoken_fallback = true;
        return a;
    }
    if (plan.model_type == "mixtral") return llama(plan, config);
    if (plan.model_type == "glm4_moe") return glm4moe(plan, config);
    if (plan.model_type == "minimax_m2") return minimax_m2(plan, config);
    if (plan.model_type == "minimax_m3_vl" || plan.model_type == "minimax_m3") return minimax_m3(plan, config);
    if (plan.model_type == "qwen3_next") return qwen3next(plan, config);
    if (plan.model_type == "qwen3_5_moe_text" || plan.model_type == "qwen3_5_moe") return qwen3next(plan, config, true);
    if (plan.model_type == "gpt_oss") return gpt_oss(plan, config);
    if (plan.model_type == "deepseek_v4") return deepseek4(plan, config);
    throw Error(ErrorKind::input,
                "GGUF output is not written for model type '" + plan.model_type +
                    "' yet (written: qwen3_moe, qwen3_vl_moe, deepseek_v3, deepseek_v2, deepseek_v32, kimi_k2, glm_moe_dsa, mixtral, glm4_moe, minimax_m2, minimax_m3, "
                    "qwen3_next, qwen3_5_moe, gpt_oss, deepseek_v4)",
                {.code = "UnsupportedGguf", .hint = "convert it to kt's formats or compressed-tensors instead"});
}

// The inverse of the tables above, for the architectures read as checkpoints: where several
// checkpoint names map to one GGUF name, the first in name order (llama's block_sparse_moe.gate,
// Mixtral's own layout, before transformers v5's mlp.gate).
std::optional<std::string> gguf_checkpoint_name(const std::string& arch, const std::string& gguf_name) {
    const NameTable* per_layer = arch == "qwen3moe" ? &qwen3moe_layer_names() : arch == "deepseek2" ? &deepseek2_layer_names()
                                 : arch == "deepseek32" || arch == "glm-dsa" ? &deepseek32_layer_names()
                                 : arch == "llama"  ? &llama_layer_names() : arch == "glm4moe" ? &glm4moe_layer_names()
                                 : arch == "minimax-m2" ? &minimax_m2_layer_names() : nullptr;
    if (!per_layer) return std::nullopt;
    for (const auto& [checkpoint, gguf] : global_names())
        if (gguf == gguf_name) return checkpoint;
    constexpr std::string_view prefix = "blk.";
    if (gguf_name.rfind(prefix, 0) != 0) return std::nullopt;
    std::int64_t layer = -1;
    const char* begin = gguf_name.data() + prefix.size();
    auto [end, ec] = std::from_chars(begin, gguf_name.data() + gguf_name.size(), layer);
    if (ec != std::errc() || end == begin || *end != '.' || layer < 0) return std::nullopt;
    const std::string rest(end + 1);
    for (const auto& [checkpoint, gguf] : *per_layer)
        if (gguf == rest) return "model.layers." + std::to_string(layer) + "." + checkpoint;
    return std::nullopt;
}

}  // namespace moequant::formats
