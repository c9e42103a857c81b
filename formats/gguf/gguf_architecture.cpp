#include "gguf_architecture.hpp"

#include <moequant/error.hpp>

#include <algorithm>
#include <charconv>
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

// A name through the global table, or "model.layers.L.<rest>" through the per-layer one.
std::optional<std::string> mapped_name(const std::string& name, const NameTable& per_layer) {
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
std::optional<std::string> qwen3moe_tensor_name(const std::string& name) {
    static const NameTable per_layer = llama_style_layer_names({
        {"self_attn.q_norm.weight", "attn_q_norm.weight"},
        {"self_attn.k_norm.weight", "attn_k_norm.weight"},
        {"mlp.gate.weight", "ffn_gate_inp.weight"},
        // Dense layers (mlp_only_layers / decoder_sparse_step) keep a plain MLP.
        {"mlp.gate_proj.weight", "ffn_gate.weight"},
        {"mlp.up_proj.weight", "ffn_up.weight"},
        {"mlp.down_proj.weight", "ffn_down.weight"},
    });
    return mapped_name(name, per_layer);
}

// DeepSeek-V2/V3's names (MODEL_TENSORS[DEEPSEEK2]); kv_b_proj maps to attn_kv_b, which the
// plan writes split into attn_k_b / attn_v_b unless the architecture keeps it whole (mla_split).
std::optional<std::string> deepseek2_tensor_name(const std::string& name) {
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
    return mapped_name(name, per_layer);
}

// Mixtral's names as llama's (MODEL_TENSORS[LLAMA]): the router is block_sparse_moe.gate.
// Mistral's native names (layers.L.attention.wq) are not mapped, as the converter does not.
std::optional<std::string> llama_tensor_name(const std::string& name) {
    static const NameTable per_layer = llama_style_layer_names({
        {"self_attn.o_proj.bias", "attn_output.bias"},
        {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
        {"mlp.gate.weight", "ffn_gate_inp.weight"},  // transformers v5's fused-expert layout
    });
    return mapped_name(name, per_layer);
}

// GLM-4.5's names (MODEL_TENSORS[GLM4_MOE]): the norm before the MoE is post_attention_norm
// (ATTN_POST_NORM; there is no ffn_norm), DeepSeek's router and shared experts.
std::optional<std::string> glm4moe_tensor_name(const std::string& name) {
    static const NameTable per_layer = post_attention_norm_layer_names(deepseek_moe_names({
        {"self_attn.q_norm.weight", "attn_q_norm.weight"},
        {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    }));
    return mapped_name(name, per_layer);
}

// MiniMax-M2's names (MODEL_TENSORS[MINIMAXM2]): Mixtral's block_sparse_moe router, its
// correction bias beside the gate (not under it), q/k norms over the whole projection.
std::optional<std::string> minimax_m2_tensor_name(const std::string& name) {
    static const NameTable per_layer = llama_style_layer_names({
        {"self_attn.q_norm.weight", "attn_q_norm.weight"},
        {"self_attn.k_norm.weight", "attn_k_norm.weight"},
        {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
        {"block_sparse_moe.e_score_correction_bias", "exp_probs_b.bias"},
    });
    return mapped_name(name, per_layer);
}

// gpt-oss's names (MODEL_TENSORS[GPT_OSS]): the norm before the MoE is post_attention_norm
// (ATTN_POST_NORM), the attention sinks a weight of their own, the router `mlp.router` with its
// bias, and the experts' biases beside the stacked experts (gate_up's split by
// gpt_oss_deinterleaved_names).
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
std::optional<std::pair<std::string, std::string>> gpt_oss_deinterleaved_names(const std::string& name) {
    const auto layer = layer_tensor(name);
    if (!layer || layer->second != "mlp.experts.gate_up_proj_bias") return std::nullopt;
    const std::string block = "blk." + std::to_string(layer->first) + ".";
    return std::pair{block + "ffn_gate_exps.bias", block + "ffn_up_exps.bias"};
}

GgufValue u32_of(const ModelConfig& config, std::string_view key) {
    return GgufValue::u32(static_cast<std::uint32_t>(config.require_int(key)));
}

// ggml's expert gating functions (llama_expert_gating_func_type).
constexpr std::uint32_t gating_softmax = 1, gating_sigmoid = 2;

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
    auto add_f32 = [&](const char* key, const char* field) {
        if (auto v = config.find(field); v && v->is_number()) kv.push_back({arch + "." + key, GgufValue::f32(static_cast<float>(v->as_double()))});
    };
    add_u32("block_count", "num_hidden_layers");
    add_u32("context_length", "max_position_embeddings");
    add_u32("embedding_length", "hidden_size");
    add_u32("feed_forward_length", "intermediate_size");
    add_u32("attention.head_count", "num_attention_heads");
    add_u32("attention.head_count_kv", "num_key_value_heads");
    add_f32("rope.freq_base", "rope_theta");
    add_f32("attention.layer_norm_rms_epsilon", "rms_norm_eps");
    for (const char* field : {"num_local_experts", "num_experts", "n_routed_experts"})
        if (config.find(field)) {
            add_u32("expert_count", field);
            break;
        }
    add_u32("expert_used_count", "num_experts_per_tok");
    add_u32("expert_group_count", "n_group");
    add_u32("expert_group_used_count", "topk_group");
    for (const char* field : {"score_function", "scoring_func", "score_func"})
        if (auto v = config.find(field); v && v->is_string()) {
            const std::string scoring = v->as_string();
            if (scoring != "sigmoid" && scoring != "softmax")
                throw Error(ErrorKind::input, "has " + std::string(field) + " '" + scoring + "', which llama.cpp's " + arch + " does not compute",
                            {.file = config.source(), .code = "UnsupportedGguf"});
            kv.push_back({arch + ".expert_gating_func", GgufValue::u32(scoring == "sigmoid" ? gating_sigmoid : gating_softmax)});
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

// For the architectures whose rope scaling keys are not mapped yet.
void refuse_rope_scaling(const ModelConfig& config, const std::string& arch) {
    if (auto scaling = config.find("rope_scaling"); scaling && scaling->is_object())
        throw Error(ErrorKind::input, "has rope_scaling, which the GGUF writer does not map for " + arch + " yet",
                    {.file = config.source(), .code = "UnsupportedGguf"});
}

GgufArchitecture qwen3moe(const ModelPlan& plan, const ModelConfig& config) {
    GgufArchitecture a = text_architecture("qwen3moe", "qwen2", config);
    a.metadata.push_back({a.arch + ".expert_feed_forward_length", u32_of(config, "moe_intermediate_size")});
    refuse_rope_scaling(config, a.arch);
    a.facts = model_facts(plan, config);
    a.tensor_name = qwen3moe_tensor_name;
    return a;
}

GgufArchitecture deepseek2(const ModelPlan& plan, const ModelConfig& config, bool legacy_mla) {
    GgufArchitecture a = text_architecture("deepseek2", "deepseek-v3", config);
    auto& kv = a.metadata;
    auto key = [&](const char* name) { return a.arch + "." + name; };
    kv.push_back({key("leading_dense_block_count"), GgufValue::u32(static_cast<std::uint32_t>(config.int_or("first_k_dense_replace", 0)))});
    kv.push_back({key("vocab_size"), u32_of(config, "vocab_size")});
    if (auto q = config.find("q_lora_rank"); q && q->is_number()) kv.push_back({key("attention.q_lora_rank"), u32_of(config, "q_lora_rank")});
    kv.push_back({key("attention.kv_lora_rank"), u32_of(config, "kv_lora_rank")});
    const std::int64_t nope = config.require_int("qk_nope_head_dim"), rope = config.require_int("qk_rope_head_dim"),
                       v_head = config.require_int("v_head_dim"), kv_lora = config.require_int("kv_lora_rank");
    const std::int64_t heads = config.require_int("num_attention_heads");
    auto u32 = [](std::int64_t v) { return GgufValue::u32(static_cast<std::uint32_t>(v)); };
    if (legacy_mla) {  // per-head K and V, as the converter wrote before its absorbed MLA (2025-04)
        kv.push_back({key("attention.key_length"), u32(nope + rope)});
        kv.push_back({key("attention.value_length"), u32(v_head)});
    } else {  // MQA over the compressed KV: one KV head of kv_lora (+ rope) values; the heads' own dims in *_mla
        set_key(kv, key("attention.head_count_kv"), u32(1));
        kv.push_back({key("attention.key_length"), u32(kv_lora + rope)});
        kv.push_back({key("attention.value_length"), u32(kv_lora)});
        kv.push_back({key("attention.key_length_mla"), u32(nope + rope)});
        kv.push_back({key("attention.value_length_mla"), u32(v_head)});
        a.mla_split = MlaShape{.heads = heads, .nope = nope, .v = v_head, .kv_lora = kv_lora};
    }
    kv.push_back({key("expert_feed_forward_length"), u32_of(config, "moe_intermediate_size")});
    set_key(kv, key("expert_count"), u32_of(config, "n_routed_experts"));
    kv.push_back({key("expert_shared_count"), GgufValue::u32(static_cast<std::uint32_t>(config.int_or("n_shared_experts", 0)))});
    kv.push_back({key("expert_weights_scale"), GgufValue::f32(static_cast<float>(config.require("routed_scaling_factor").as_double()))});
    if (auto norm = config.find("norm_topk_prob"); norm && norm->is_bool()) kv.push_back({key("expert_weights_norm"), GgufValue::boolean(norm->as_bool())});
    // DeepseekV2Model writes it whatever the base found: softmax when the config names none.
    const std::string scoring = config.string_or("scoring_func", "softmax");
    set_key(kv, key("expert_gating_func"), GgufValue::u32(scoring == "sigmoid" ? gating_sigmoid : gating_softmax));
    kv.push_back({key("rope.dimension_count"), u32_of(config, "qk_rope_head_dim")});
    if (auto scaling = config.find("rope_scaling"); scaling && scaling->is_object() && scaling->get("factor")) {
        const std::string type = scaling->get("type") ? scaling->get("type")->as_string() : scaling->get("rope_type") ? scaling->get("rope_type")->as_string() : "";
        if (type != "yarn") throw Error(ErrorKind::input, "has rope_scaling type '" + type + "'; deepseek2 GGUFs take yarn", {.code = "UnsupportedGguf"});
        kv.push_back({key("rope.scaling.type"), GgufValue::string("yarn")});
        kv.push_back({key("rope.scaling.factor"), GgufValue::f32(static_cast<float>(scaling->get("factor")->as_double()))});
        kv.push_back({key("rope.scaling.original_context_length"),
                      GgufValue::u32(static_cast<std::uint32_t>(scaling->get("original_max_position_embeddings")->as_int()))});
        // The converter's legacy 0.1 x mscale_all_dim, which llama.cpp divides back.
        kv.push_back({key("rope.scaling.yarn_log_multiplier"),
                      GgufValue::f32(static_cast<float>(0.1 * (scaling->get("mscale_all_dim") ? scaling->get("mscale_all_dim")->as_double() : 0.0)))});
    }
    a.facts = legacy_mla ? model_facts(plan, config) : model_facts(plan, config, 1);
    a.tensor_name = deepseek2_tensor_name;
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
    double partial = 0.5;
    if (auto v = config.find("partial_rotary_factor"); v && v->is_number()) partial = v->as_double();
    kv.push_back({key("rope.dimension_count"), GgufValue::u32(static_cast<std::uint32_t>(static_cast<double>(head_dim_of(config)) * partial))});
    refuse_rope_scaling(config, a.arch);
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
    // _set_vocab_glm: [gMASK] opens every prompt; <|user|> ends a turn (its <|endoftext|> would not stop).
    a.named_specials = {{"bos", "[gMASK]"}, {"eot", "<|user|>"}, {"unk", "<|endoftext|>"}, {"eom", "<|observation|>"}};
    a.facts = model_facts(plan, config);
    a.tensor_name = glm4moe_tensor_name;
    return a;
}

// MiniMax-M2/M2.1/M2.5/M2.7 as llama.cpp's minimax-m2 (MiniMaxM2Model): the text-model keys
// (sigmoid gating from scoring_func), intermediate_size as the experts' length, rotary_dim as
// the rotary dimension (llama.cpp rotates it NeoX-style: rows as stored). The MTP modules are not
// written, as the converter does not write them.
GgufArchitecture minimax_m2(const ModelPlan& plan, const ModelConfig& config) {
    GgufArchitecture a = text_architecture("minimax-m2", "minimax-m2", config);
    auto& kv = a.metadata;
    kv.push_back({a.arch + ".expert_feed_forward_length", u32_of(config, "intermediate_size")});
    kv.push_back({a.arch + ".rope.dimension_count", u32_of(config, "rotary_dim")});
    refuse_rope_scaling(config, a.arch);
    a.facts = model_facts(plan, config);
    a.tensor_name = minimax_m2_tensor_name;
    return a;
}

// The rope scaling of a config as TextModel writes it: transformers v5's rope_parameters, else
// rope_scaling; yarn only (gpt-oss's), before rope.freq_base, each optional yarn key when present.
// None when the config scales nothing.
std::vector<GgufKeyValue> yarn_rope_keys(const std::string& arch, const ModelConfig& config) {
    auto scaling = config.find("rope_parameters");
    if (!scaling || !scaling->is_object()) scaling = config.find("rope_scaling");
    if (!scaling || !scaling->is_object()) return {};
    const auto type = scaling->get("rope_type") ? scaling->get("rope_type") : scaling->get("type");
    const std::string name = type && type->is_string() ? type->as_string() : "";
    if (name.empty()) return {};
    const auto factor = scaling->get("factor");
    if (name != "yarn" || !factor || !factor->is_number())
        throw Error(ErrorKind::input, "has rope_scaling type '" + name + "'; the GGUF writer maps yarn scaling with a factor for " + arch,
                    {.file = config.source(), .code = "UnsupportedGguf"});
    const auto original = scaling->get("original_max_position_embeddings");
    if (!original || !original->is_number())
        throw Error(ErrorKind::input, "has yarn rope_scaling without original_max_position_embeddings, which llama.cpp's yarn needs",
                    {.file = config.source(), .code = "UnsupportedGguf"});
    std::vector<GgufKeyValue> kv{
        {arch + ".rope.scaling.type", GgufValue::string("yarn")},
        {arch + ".rope.scaling.factor", GgufValue::f32(static_cast<float>(factor->as_double()))},
        {arch + ".rope.scaling.original_context_length", GgufValue::u32(static_cast<std::uint32_t>(original->as_int()))},
    };
    const std::pair<const char*, const char*> optional_keys[] = {{"extrapolation_factor", "yarn_ext_factor"},
                                                                 {"attention_factor", "yarn_attn_factor"},
                                                                 {"attn_factor", "yarn_attn_factor"},
                                                                 {"beta_fast", "yarn_beta_fast"},
                                                                 {"beta_slow", "yarn_beta_slow"}};
    for (const auto& [field, key] : optional_keys)
        if (auto v = scaling->get(field); v && v->is_number())
            set_key(kv, arch + ".rope.scaling." + key, GgufValue::f32(static_cast<float>(v->as_double())));
    return kv;
}

// gpt-oss as llama.cpp's gpt-oss (GptOssModel): the text-model keys with the yarn keys before
// rope.freq_base (TextModel's order), sliding_window, intermediate_size as the experts' length;
// the sliding-window pattern is not written (llama.cpp's default: every other layer from layer 0),
// so a config whose layer_types say otherwise is refused.
GgufArchitecture gpt_oss(const ModelPlan& plan, const ModelConfig& config) {
    GgufArchitecture a = text_architecture("gpt-oss", "gpt-4o", config);
    auto& kv = a.metadata;
    const auto base = std::find_if(kv.begin(), kv.end(), [&](const GgufKeyValue& e) { return e.key == a.arch + ".rope.freq_base"; });
    const std::vector<GgufKeyValue> yarn = yarn_rope_keys(a.arch, config);
    kv.insert(base, yarn.begin(), yarn.end());
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
    a.deinterleaved_names = gpt_oss_deinterleaved_names;
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
    // The converter writes linear scaling (a rope_scaling with a factor), and drops every other
    // kind, which llama then would not compute (llama3's rope_freqs are not Mixtral's): refused.
    if (auto scaling = config.find("rope_scaling"); scaling && scaling->is_object() && scaling->get("factor")) {
        const auto type = scaling->get("type") ? scaling->get("type") : scaling->get("rope_type");
        const std::string name = type && type->is_string() ? type->as_string() : "";
        if (name != "linear")
            throw Error(ErrorKind::input, "has rope_scaling type '" + name + "'; llama.cpp's llama GGUF takes linear scaling only",
                        {.file = config.source(), .code = "UnsupportedGguf"});
        kv.push_back({key("rope.scaling.type"), GgufValue::string("linear")});
        kv.push_back({key("rope.scaling.factor"), GgufValue::f32(static_cast<float>(scaling->get("factor")->as_double()))});
    }
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
    if (plan.model_type == "deepseek_v3" || plan.model_type == "deepseek_v2") return deepseek2(plan, config, request.legacy_mla);
    if (plan.model_type == "mixtral") return llama(plan, config);
    if (plan.model_type == "glm4_moe") return glm4moe(plan, config);
    if (plan.model_type == "minimax_m2") return minimax_m2(plan, config);
    if (plan.model_type == "gpt_oss") return gpt_oss(plan, config);
    throw Error(ErrorKind::input,
                "GGUF output is not written for model type '" + plan.model_type +
                    "' yet (written: qwen3_moe, deepseek_v3, deepseek_v2, mixtral, glm4_moe, minimax_m2, gpt_oss)",
                {.code = "UnsupportedGguf", .hint = "convert it to kt's formats or compressed-tensors instead"});
}

}  // namespace moequant::formats
