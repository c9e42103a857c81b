#include "gguf_source_config.hpp"

#include <moequant/error.hpp>

#include <boost/json.hpp>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>

namespace moequant::formats {
namespace {

namespace json = boost::json;

// Sizes and counts above this are refused: no model has them, and the adapters multiply them.
constexpr std::uint64_t max_dimension = std::uint64_t{1} << 24;

// The {arch}.* keys of a file, read with their names in every message.
class ArchKeys {
public:
    ArchKeys(const GgufFile& file, std::string arch, std::string file_name)
        : file_(file), arch_(std::move(arch)), file_name_(std::move(file_name)) {}

    const std::string& file_name() const { return file_name_; }

    [[noreturn]] void bad(const std::string& key, const std::string& why) const {
        throw Error(ErrorKind::input, "GGUF key " + key + " " + why, {.file = file_name_, .code = "BadGgufKey"});
    }

    // An unsigned count or size, checked to be in 1..max_dimension (0 allowed where `zero_ok`).
    std::optional<std::int64_t> count(const std::string& name, bool zero_ok = false) const {
        const std::string key = arch_ + "." + name;
        const GgufValue* v = file_.find(key);
        if (!v) return std::nullopt;
        std::optional<std::uint64_t> u = v->as_unsigned();
        if (!u)
            if (auto s = v->as_signed(); s && *s >= 0) u = static_cast<std::uint64_t>(*s);
        if (!u) bad(key, "is not a non-negative integer");
        if (*u > max_dimension || (*u == 0 && !zero_ok)) bad(key, "is " + std::to_string(*u) + ", not a size this model can have");
        return static_cast<std::int64_t>(*u);
    }
    std::int64_t require_count(const std::string& name, bool zero_ok = false) const {
        if (auto v = count(name, zero_ok)) return *v;
        bad(arch_ + "." + name, "is missing; llama.cpp's " + arch_ + " needs it");
    }
    std::optional<double> number(const std::string& name) const {
        const std::string key = arch_ + "." + name;
        const GgufValue* v = file_.find(key);
        if (!v) return std::nullopt;
        const auto f = v->as_float();
        if (!f || !std::isfinite(*f)) bad(key, "is not a finite float");
        return shortest(*f);
    }
    std::optional<bool> flag(const std::string& name) const {
        const GgufValue* v = file_.find(arch_ + "." + name);
        if (!v) return std::nullopt;
        if (auto b = v->as_bool()) return b;
        bad(arch_ + "." + name, "is not a bool");
    }
    std::optional<std::vector<bool>> booleans(const std::string& name) const {
        const std::string key = arch_ + "." + name;
        const GgufValue* v = file_.find(key);
        if (!v) return std::nullopt;
        if (v->type != GgufType::array || v->element != GgufType::boolean || v->bytes.size() != v->count) bad(key, "is not an array of bools");
        std::vector<bool> out;
        for (char b : v->bytes) out.push_back(b != 0);
        return out;
    }
    std::optional<std::string> text(const std::string& key) const {
        const GgufValue* v = file_.find(key);
        return v ? v->as_string() : std::nullopt;
    }
    // A token id key of the tokenizer (tokenizer.ggml.bos_token_id, ...), when the file has one.
    std::optional<std::int64_t> token_id(const std::string& key) const {
        const GgufValue* v = file_.find(key);
        if (!v) return std::nullopt;
        if (auto u = v->as_unsigned(); u && *u <= max_dimension) return static_cast<std::int64_t>(*u);
        if (auto s = v->as_signed(); s && *s >= 0 && *s <= static_cast<std::int64_t>(max_dimension)) return *s;
        bad(key, "is not a token id");
    }

private:
    // The float32 stored as the shortest decimal that reads back to it (1e-06, not 9.99999997e-07),
    // as the config it came from most likely spelled it.
    static double shortest(double stored) {
        char buffer[32];
        const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer - 1, static_cast<float>(stored));
        *end = '\0';
        return ec == std::errc() ? std::strtod(buffer, nullptr) : stored;
    }

    const GgufFile& file_;
    std::string arch_;
    std::string file_name_;
};

// llama.cpp's expert gating functions (llama_expert_gating_func_type).
constexpr std::int64_t gating_softmax = 1, gating_sigmoid = 2;

// The keys every text model has (TextModel.set_gguf_parameters' inverse).
void add_text_model_fields(const ArchKeys& keys, const GgufSourceTensors& tensors, json::object& c) {
    c["num_hidden_layers"] = keys.require_count("block_count");
    c["hidden_size"] = keys.require_count("embedding_length");
    c["num_attention_heads"] = keys.require_count("attention.head_count");
    c["num_key_value_heads"] = keys.count("attention.head_count_kv").value_or(c["num_attention_heads"].as_int64());
    if (auto v = keys.count("context_length")) c["max_position_embeddings"] = *v;
    if (auto v = keys.count("feed_forward_length")) c["intermediate_size"] = *v;
    c["rms_norm_eps"] = keys.number("attention.layer_norm_rms_epsilon").value_or(1e-6);
    c["rope_theta"] = keys.number("rope.freq_base").value_or(10000.0);
    c["hidden_act"] = "silu";
    c["tie_word_embeddings"] = !tensors.has_output;
    c["torch_dtype"] = "bfloat16";
}

// rope_scaling from the rope.scaling.* keys (add_rope_keys' inverse); nullopt when there are none.
std::optional<json::object> rope_scaling(const ArchKeys& keys, const std::string& arch) {
    const auto type = keys.text(arch + ".rope.scaling.type");
    if (!type || *type == "none") return std::nullopt;
    json::object r;
    if (*type == "linear") {
        r["type"] = "linear";
        if (auto f = keys.number("rope.scaling.factor")) r["factor"] = *f;
        return r;
    }
    if (*type != "yarn") keys.bad(arch + ".rope.scaling.type", "is '" + *type + "', which moequant does not read (linear, yarn)");
    r["type"] = "yarn";
    if (auto f = keys.number("rope.scaling.factor")) r["factor"] = *f;
    if (auto n = keys.count("rope.scaling.original_context_length")) r["original_max_position_embeddings"] = *n;
    if (auto v = keys.number("rope.scaling.yarn_beta_fast")) r["beta_fast"] = *v;
    if (auto v = keys.number("rope.scaling.yarn_beta_slow")) r["beta_slow"] = *v;
    if (auto v = keys.number("rope.scaling.yarn_ext_factor")) r["extrapolation_factor"] = *v;
    if (auto v = keys.number("rope.scaling.yarn_attn_factor")) r["attn_factor"] = *v;
    return r;
}

void add_token_ids(const ArchKeys& keys, json::object& c) {
    if (auto id = keys.token_id("tokenizer.ggml.bos_token_id")) c["bos_token_id"] = *id;
    if (auto id = keys.token_id("tokenizer.ggml.eos_token_id")) c["eos_token_id"] = *id;
}

json::array layer_list(const std::vector<std::int64_t>& layers) {
    json::array a;
    for (std::int64_t l : layers) a.push_back(l);
    return a;
}

json::object qwen3_moe(const ArchKeys& keys, const GgufSourceTensors& tensors) {
    json::object c;
    c["architectures"] = json::array{"Qwen3MoeForCausalLM"};
    c["model_type"] = "qwen3_moe";
    add_text_model_fields(keys, tensors, c);
    c["head_dim"] = keys.count("attention.key_length").value_or(c["hidden_size"].as_int64() / c["num_attention_heads"].as_int64());
    c["moe_intermediate_size"] = keys.require_count("expert_feed_forward_length");
    c["num_experts"] = keys.require_count("expert_count");
    c["num_experts_per_tok"] = keys.require_count("expert_used_count");
    c["norm_topk_prob"] = true;  // llama.cpp's qwen3moe renormalizes the chosen experts' weights
    c["decoder_sparse_step"] = 1;
    c["mlp_only_layers"] = layer_list(tensors.dense_layers);
    c["attention_bias"] = tensors.has_attention_bias;
    c["use_sliding_window"] = false;
    if (auto r = rope_scaling(keys, "qwen3moe")) c["rope_scaling"] = std::move(*r);
    return c;
}

// DeepSeek-V2/V3 (deepseek2), and the MLA layout and keys DeepSeek-V3.2 and GLM-5 share with it.
json::object deepseek(const ArchKeys& keys, const GgufSourceTensors& tensors, const std::string& arch = "deepseek2") {
    json::object c;
    const std::int64_t gating = keys.count("expert_gating_func").value_or(gating_softmax);
    if (gating != gating_softmax && gating != gating_sigmoid)
        keys.bad(arch + ".expert_gating_func", "is " + std::to_string(gating) + ", neither softmax (1) nor sigmoid (2)");
    const bool v3 = gating == gating_sigmoid;
    c["architectures"] = json::array{v3 ? "DeepseekV3ForCausalLM" : "DeepseekV2ForCausalLM"};
    c["model_type"] = v3 ? "deepseek_v3" : "deepseek_v2";
    add_text_model_fields(keys, tensors, c);
    const std::int64_t heads = c["num_attention_heads"].as_int64();
    const std::int64_t rope = keys.require_count("rope.dimension_count");
    c["qk_rope_head_dim"] = rope;
    c["kv_lora_rank"] = keys.require_count("attention.kv_lora_rank");
    if (auto q = keys.count("attention.q_lora_rank")) c["q_lora_rank"] = *q;
    else c["q_lora_rank"] = nullptr;
    // Today's absorbed layout keeps the heads' own sizes in *_mla; the legacy one in key/value_length.
    const bool absorbed = keys.count("attention.key_length_mla").has_value();
    const std::int64_t key_length = keys.require_count(absorbed ? "attention.key_length_mla" : "attention.key_length");
    const std::int64_t value_length = keys.require_count(absorbed ? "attention.value_length_mla" : "attention.value_length");
    if (key_length <= rope) keys.bad(arch + ".attention.key_length", "is " + std::to_string(key_length) + ", not more than the rotary dimension");
    c["qk_nope_head_dim"] = key_length - rope;
    c["v_head_dim"] = value_length;
    if (absorbed) c["num_key_value_heads"] = heads;  // the checkpoint's heads; the GGUF's 1 is the compressed cache's
    c["first_k_dense_replace"] = keys.count("leading_dense_block_count", true).value_or(0);
    c["moe_layer_freq"] = 1;
    c["moe_intermediate_size"] = keys.require_count("expert_feed_forward_length");
    c["n_routed_experts"] = keys.require_count("expert_count");
    c["num_experts_per_tok"] = keys.require_count("expert_used_count");
    c["n_shared_experts"] = keys.count("expert_shared_count", true).value_or(0);
    c["routed_scaling_factor"] = keys.number("expert_weights_scale").value_or(1.0);
    c["norm_topk_prob"] = keys.flag("expert_weights_norm").value_or(false);
    c["scoring_func"] = v3 ? "sigmoid" : "softmax";
    c["topk_method"] = v3 ? "noaux_tc" : "greedy";
    c["n_group"] = keys.count("expert_group_count").value_or(1);
    c["topk_group"] = keys.count("expert_group_used_count").value_or(1);
    c["num_nextn_predict_layers"] = 0;
    c["attention_bias"] = false;
    if (auto r = rope_scaling(keys, arch)) {
        // The converter writes 0.1 x mscale_all_dim as yarn_log_multiplier (llama.cpp divides it
        // back); DeepSeek's releases have mscale = mscale_all_dim, whose factors then cancel.
        if (auto m = keys.number("rope.scaling.yarn_log_multiplier")) {
            const double mscale = static_cast<double>(static_cast<float>(*m) / 0.1f);
            (*r)["mscale"] = mscale;
            (*r)["mscale_all_dim"] = mscale;
        }
        c["rope_scaling"] = std::move(*r);
    }
    return c;
}

// The DSA indexer's sizes (deepseek32's and glm-dsa's attention.indexer.* keys).
void add_indexer_fields(const ArchKeys& keys, json::object& c) {
    c["index_n_heads"] = keys.require_count("attention.indexer.head_count");
    c["index_head_dim"] = keys.require_count("attention.indexer.key_length");
    c["index_topk"] = keys.require_count("attention.indexer.top_k");
}

// DeepSeek-V3.2: V3's model and keys, sigmoid routing, and the lightning indexer.
json::object deepseek_v32(const ArchKeys& keys, const GgufSourceTensors& tensors) {
    json::object c = deepseek(keys, tensors, "deepseek32");
    if (c["scoring_func"] != "sigmoid") keys.bad("deepseek32.expert_gating_func", "is not sigmoid (2), as DeepSeek-V3.2 routes");
    c["architectures"] = json::array{"DeepseekV32ForCausalLM"};
    c["model_type"] = "deepseek_v32";
    add_indexer_fields(keys, c);
    return c;
}

// GLM-5/5.1/5.2: deepseek32's model with GLM's rotary part and indexer layer types. The converter
// writes qk_rope_head_dim x partial_rotary_factor as the rotary dimension; the released models
// rotate all of qk_rope_head_dim (factor 1), which is what is read back. A file without
// attention.indexer.types has an indexer in every layer.
json::object glm_moe_dsa(const ArchKeys& keys, const GgufSourceTensors& tensors) {
    json::object c = deepseek(keys, tensors, "glm-dsa");
    if (c["scoring_func"] != "sigmoid") keys.bad("glm-dsa.expert_gating_func", "is not sigmoid (2), as GLM-5 routes");
    c["architectures"] = json::array{"GlmMoeDsaForCausalLM"};
    c["model_type"] = "glm_moe_dsa";
    c["head_dim"] = c["qk_rope_head_dim"];
    c["rope_interleave"] = true;
    c["indexer_rope_interleave"] = true;
    add_indexer_fields(keys, c);
    if (const auto full = keys.booleans("attention.indexer.types")) {
        if (static_cast<std::int64_t>(full->size()) != c["num_hidden_layers"].as_int64())
            keys.bad("glm-dsa.attention.indexer.types", "has " + std::to_string(full->size()) + " entries, not one per layer");
        json::array names;
        for (bool f : *full) names.push_back(f ? "full" : "shared");
        c["indexer_types"] = std::move(names);
    }
    return c;
}

// GLM-4.5/4.6/4.7: llama.cpp's glm4moe routes by sigmoid scores with the correction bias, rotates
// rope.dimension_count of each head (partial_rotary_factor), NeoX-style.
json::object glm4_moe(const ArchKeys& keys, const GgufSourceTensors& tensors) {
    json::object c;
    c["architectures"] = json::array{"Glm4MoeForCausalLM"};
    c["model_type"] = "glm4_moe";
    add_text_model_fields(keys, tensors, c);
    const std::int64_t head_dim = keys.count("attention.key_length").value_or(c["hidden_size"].as_int64() / c["num_attention_heads"].as_int64());
    const std::int64_t rotary = keys.require_count("rope.dimension_count");
    if (rotary > head_dim) keys.bad("glm4moe.rope.dimension_count", "is " + std::to_string(rotary) + ", more than a head's " + std::to_string(head_dim));
    c["head_dim"] = head_dim;
    c["partial_rotary_factor"] = static_cast<double>(rotary) / static_cast<double>(head_dim);
    c["moe_intermediate_size"] = keys.require_count("expert_feed_forward_length");
    c["n_routed_experts"] = keys.require_count("expert_count");
    c["num_experts_per_tok"] = keys.require_count("expert_used_count");
    c["n_shared_experts"] = keys.count("expert_shared_count", true).value_or(0);
    c["first_k_dense_replace"] = keys.count("leading_dense_block_count", true).value_or(0);
    c["routed_scaling_factor"] = keys.number("expert_weights_scale").value_or(1.0);
    c["norm_topk_prob"] = keys.flag("expert_weights_norm").value_or(false);
    c["n_group"] = keys.count("expert_group_count").value_or(1);
    c["topk_group"] = keys.count("expert_group_used_count").value_or(1);
    c["use_qk_norm"] = tensors.has_qk_norm;
    c["attention_bias"] = tensors.has_attention_bias;
    c["num_nextn_predict_layers"] = 0;
    if (auto r = rope_scaling(keys, "glm4moe")) c["rope_scaling"] = std::move(*r);
    return c;
}

// MiniMax-M2/M2.1/M2.5/M2.7: sigmoid routing with the correction bias, q/k norms over the whole
// projection, rotary_dim of each head (NeoX-style); no MTP modules in the GGUF.
json::object minimax_m2(const ArchKeys& keys, const GgufSourceTensors& tensors) {
    json::object c;
    c["architectures"] = json::array{"MiniMaxM2ForCausalLM"};
    c["model_type"] = "minimax_m2";
    add_text_model_fields(keys, tensors, c);
    const std::int64_t layers = c["num_hidden_layers"].as_int64();
    c["head_dim"] = keys.count("attention.key_length").value_or(c["hidden_size"].as_int64() / c["num_attention_heads"].as_int64());
    c["intermediate_size"] = keys.require_count("expert_feed_forward_length");
    c["rotary_dim"] = keys.require_count("rope.dimension_count");
    c["num_local_experts"] = keys.require_count("expert_count");
    c["num_experts_per_tok"] = keys.require_count("expert_used_count");
    c["scoring_func"] = "sigmoid";
    c["use_routing_bias"] = tensors.has_router_bias;
    c["use_qk_norm"] = tensors.has_qk_norm;
    c["qk_norm_type"] = "per_layer";
    c["attn_type_list"] = json::array(static_cast<std::size_t>(layers), 1);
    c["shared_intermediate_size"] = 0;
    c["use_mtp"] = false;
    c["num_mtp_modules"] = 0;
    if (auto r = rope_scaling(keys, "minimax-m2")) c["rope_scaling"] = std::move(*r);
    return c;
}

json::object mixtral(const ArchKeys& keys, const GgufSourceTensors& tensors) {
    if (!keys.count("expert_count"))
        throw Error(ErrorKind::input, "is a dense llama model (no llama.expert_count): moequant reads MoE models",
                    {.file = keys.file_name(), .code = "UnsupportedGguf"});
    json::object c;
    c["architectures"] = json::array{"MixtralForCausalLM"};
    c["model_type"] = "mixtral";
    add_text_model_fields(keys, tensors, c);
    if (auto d = keys.count("attention.key_length")) c["head_dim"] = *d;
    c["num_local_experts"] = keys.require_count("expert_count");
    c["num_experts_per_tok"] = keys.require_count("expert_used_count");
    c["sliding_window"] = nullptr;
    if (!c.contains("intermediate_size")) c["intermediate_size"] = keys.require_count("expert_feed_forward_length");
    if (auto r = rope_scaling(keys, "llama")) c["rope_scaling"] = std::move(*r);
    return c;
}

}  // namespace

std::string gguf_source_config(const GgufFile& first, const GgufSourceTensors& tensors, const std::string& file) {
    const GgufValue* arch_value = first.find("general.architecture");
    const std::optional<std::string> arch = arch_value ? arch_value->as_string() : std::nullopt;
    if (!arch) throw Error(ErrorKind::input, "has no general.architecture", {.file = file, .code = "UnsupportedGguf"});
    const ArchKeys keys(first, *arch, file);
    json::object config;
    if (*arch == "qwen3moe") config = qwen3_moe(keys, tensors);
    else if (*arch == "deepseek2") config = deepseek(keys, tensors);
    else if (*arch == "deepseek32") config = deepseek_v32(keys, tensors);
    else if (*arch == "glm-dsa") config = glm_moe_dsa(keys, tensors);
    else if (*arch == "llama") config = mixtral(keys, tensors);
    else if (*arch == "glm4moe") config = glm4_moe(keys, tensors);
    else if (*arch == "minimax-m2") config = minimax_m2(keys, tensors);
    else
        throw Error(ErrorKind::input, "is a GGUF of architecture '" + arch->substr(0, 64) + "', which moequant does not read as a source yet",
                    {.file = file, .code = "UnsupportedGguf", .hint = "read as sources: qwen3moe, deepseek2, deepseek32, glm-dsa, llama (Mixtral), glm4moe, minimax-m2"});
    const std::int64_t vocab = keys.count("vocab_size").value_or(tensors.vocab_rows);
    if (vocab <= 0) keys.bad(*arch + ".vocab_size", "is missing and the file has no token_embd to count");
    config["vocab_size"] = vocab;
    add_token_ids(keys, config);
    return json::serialize(config) + "\n";
}

}  // namespace moequant::formats
