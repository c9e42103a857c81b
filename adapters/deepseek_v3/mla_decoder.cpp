#include "mla_decoder.hpp"

#include "config_counts.hpp"
#include "dense_attention_window.hpp"
#include "rope_settings.hpp"

#include <moequant/error.hpp>
#include <moequant/parallel.hpp>
#include <moequant/tensor.hpp>

#include <cmath>
#include <numeric>
#include <optional>
#include <string>

namespace moequant::adapters {

namespace {

struct MlaSpec {
    std::int64_t heads = 0, q_lora = 0, kv_lora = 0, nope = 0, rope = 0, v_head = 0;
    std::vector<float> inv_freq;  // over the rope dims
    float scale = 1.0f;           // softmax scale
    // DeepSeek-V3.2 / GLM-5: each query attends to its index_topk best-scored keys only.
    DenseAttentionWindow sparse;
};

[[noreturn]] void invalid_config(const ModelConfig& config, const std::string& message) {
    throw Error(ErrorKind::input, message, {.file = config.source(), .code = "InvalidConfig"});
}

// The sparse-attention (DSA) families: their Hugging Face configs default index_topk to 2048.
const char* sparse_attention_family(const std::string& model_type) {
    if (model_type == "deepseek_v32") return "DeepSeek-V3.2";
    if (model_type == "glm_moe_dsa") return "GLM-5";
    return nullptr;
}

// transformers 5 writes `rope_parameters` ({rope_theta, rope_type, yarn's keys}) where older
// configs have `rope_theta` and `rope_scaling`; either form is read.
std::optional<ConfigValue> rope_parameters(const ModelConfig& config) {
    auto v = config.find("rope_parameters");
    if (v && !v->is_null() && !v->is_object()) invalid_config(config, "'rope_parameters' is not an object");
    return v && v->is_object() ? v : std::nullopt;
}

MlaSpec mla_from_config(const ModelConfig& config) {
    MlaSpec m;
    m.heads = positive_int(config, "num_attention_heads");
    m.q_lora = config.int_or("q_lora_rank", 0);
    m.kv_lora = positive_int(config, "kv_lora_rank");
    m.nope = positive_int(config, "qk_nope_head_dim");
    m.rope = config.require_int("qk_rope_head_dim");
    m.v_head = positive_int(config, "v_head_dim");
    if (const char* family = sparse_attention_family(config.model_type())) {
        m.sparse.family = family;
        m.sparse.tokens = positive_int_or(config, "index_topk", 2048);
    } else if (config.find("index_topk")) {
        m.sparse.family = "this model";
        m.sparse.tokens = positive_int(config, "index_topk");
    }
    m.sparse.setting = "index_topk";
    m.sparse.config_file = config.source();
    // Only interleaved rotary pairs are implemented: transformers' DeepSeek-V3.2 and GLM-5
    // attention interleave whatever the key says, so a false one is refused, not followed.
    if (auto v = config.find("rope_interleave"); v && !v->is_null() && !v->as_bool())
        invalid_config(config, "'rope_interleave' is false: only interleaved rotary pairs are supported for MLA attention");
    const auto parameters = rope_parameters(config);
    const double theta = rope_setting(config, "rope_theta", 10000.0);
    m.scale = 1.0f / std::sqrt(static_cast<float>(m.nope + m.rope));
    m.inv_freq = rope_inverse_frequencies(theta, m.rope);
    auto scaling = config.find("rope_scaling");
    if ((!scaling || scaling->is_null()) && parameters) {
        auto type = parameters->get("rope_type");
        if (type && type->is_string() && type->as_string() != "default") scaling = parameters;
    }
    if (scaling && scaling->is_object()) {
        auto number = [&](const char* key, double fallback) {
            auto v = scaling->get(key);
            return v && !v->is_null() ? v->as_double() : fallback;
        };
        std::string type = scaling->get("type") ? scaling->get("type")->as_string() : "";
        if (type.empty() && scaling->get("rope_type")) type = scaling->get("rope_type")->as_string();
        if (type != "yarn")
            invalid_config(config, "'" + scaling->path() + "' type '" + type + "' is not supported (yarn only)");
        const double factor = number("factor", 1.0);
        m.inv_freq = yarn_inverse_frequencies(theta, m.rope, factor, number("original_max_position_embeddings", 4096),
                                              number("beta_fast", 32), number("beta_slow", 1),
                                              !(scaling->get("truncate") && !scaling->get("truncate")->as_bool()));
        // cos/sin carry get_mscale(f, mscale) / get_mscale(f, mscale_all_dim); DeepSeek's configs
        // set both to the same value, which makes it 1.
        const double mscale = number("mscale", 1.0), mscale_all = number("mscale_all_dim", 0.0);
        if (mscale_all != 0 && yarn_mscale(factor, mscale) != yarn_mscale(factor, mscale_all))
            invalid_config(config, "'" + scaling->path() + "' mscale differs from mscale_all_dim (not supported)");
        if (mscale_all != 0) {
            const double ms = yarn_mscale(factor, mscale_all);
            m.scale = static_cast<float>(m.scale * ms * ms);
        }
    }
    return m;
}

class MlaLayer final : public PreNormDecoderLayer {
public:
    MlaLayer(const DecoderSpec& spec, const MlaSpec& m, const Checkpoint& ckpt, const ModelPlan& plan, std::int64_t index)
        : PreNormDecoderLayer(spec, ckpt, plan, index), m_(m), hidden_(spec.hidden), eps_(spec.eps) {}

private:
    // Every intermediate is a Tensor its producer writes whole (linear_into): at DeepSeek-V3's
    // size q, kv and the attended values are hundreds of MB a batch, which as fresh std::vectors
    // were zero-filled and faulted in 4 KiB pages on every call.
    std::vector<float> mix(const std::vector<float>& x, std::span<const std::int64_t> lengths) const override {
        check_dense_attention_window(m_.sparse, lengths);
        const std::int64_t t = std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0});
        const std::int64_t h = hidden_, heads = m_.heads, qk = m_.nope + m_.rope;
        auto rows = [t](std::int64_t width) { return Tensor::uninitialized(DType::F32, {t, width}); };
        Tensor q = rows(heads * qk);
        if (m_.q_lora > 0) {
            Tensor a = rows(m_.q_lora);
            linear_into(x.data(), t, weight("self_attn.q_a_proj.weight", {m_.q_lora, h}).data(), m_.q_lora, h, a.data_as<float>());
            rms_norm(a.data_as<float>(), t, m_.q_lora, weight("self_attn.q_a_layernorm.weight", {m_.q_lora}).data(), eps_, false,
                     a.data_as<float>());
            linear_into(a.data_as<float>(), t, weight("self_attn.q_b_proj.weight", {heads * qk, m_.q_lora}).data(), heads * qk,
                        m_.q_lora, q.data_as<float>());
        } else {
            linear_into(x.data(), t, weight("self_attn.q_proj.weight", {heads * qk, h}).data(), heads * qk, h, q.data_as<float>());
        }
        const std::int64_t a_width = m_.kv_lora + m_.rope;
        Tensor kv_a = rows(a_width), c_kv = rows(m_.kv_lora), k_rope = rows(m_.rope);
        linear_into(x.data(), t, weight("self_attn.kv_a_proj_with_mqa.weight", {a_width, h}).data(), a_width, h,
                    kv_a.data_as<float>());
        for (std::int64_t i = 0; i < t; ++i) {
            std::copy_n(kv_a.data_as<float>() + i * a_width, m_.kv_lora, c_kv.data_as<float>() + i * m_.kv_lora);
            std::copy_n(kv_a.data_as<float>() + i * a_width + m_.kv_lora, m_.rope, k_rope.data_as<float>() + i * m_.rope);
        }
        rms_norm(c_kv.data_as<float>(), t, m_.kv_lora, weight("self_attn.kv_a_layernorm.weight", {m_.kv_lora}).data(), eps_,
                 false, c_kv.data_as<float>());
        const std::int64_t b_width = heads * (m_.nope + m_.v_head);
        Tensor kv = rows(b_width);
        linear_into(c_kv.data_as<float>(), t, weight("self_attn.kv_b_proj.weight", {b_width, m_.kv_lora}).data(), b_width,
                    m_.kv_lora, kv.data_as<float>());

        // Keys [t, heads, nope + rope] (the rope part shared by all heads) and values [t, heads, v],
        // gathered by token in parallel.
        apply_rope(k_rope.data_as<float>(), 1, m_.rope, m_.rope, lengths, m_.inv_freq, RopeStyle::interleaved);
        Tensor k = Tensor::uninitialized(DType::F32, {t, heads, qk}), v = Tensor::uninitialized(DType::F32, {t, heads, m_.v_head});
        float* const keys = k.data_as<float>();
        float* const values = v.data_as<float>();
        const float* const kv_b = kv.data_as<float>();
        const float* const rope_keys = k_rope.data_as<float>();
        parallel_for(0, static_cast<std::size_t>(t), 16, [&](std::size_t first, std::size_t last) {
            for (auto i = static_cast<std::int64_t>(first); i < static_cast<std::int64_t>(last); ++i)
                for (std::int64_t hd = 0; hd < heads; ++hd) {
                    const float* src = kv_b + (i * heads + hd) * (m_.nope + m_.v_head);
                    float* key = keys + (i * heads + hd) * qk;
                    std::copy_n(src, m_.nope, key);
                    std::copy_n(rope_keys + i * m_.rope, m_.rope, key + m_.nope);
                    std::copy_n(src + m_.nope, m_.v_head, values + (i * heads + hd) * m_.v_head);
                }
        });
        // Queries: the rope part of every head (its last `rope` dims: qk = nope + rope, so the
        // last head's window ends at q's end) rotated in place.
        if (t > 0) apply_rope(q.data_as<float>() + m_.nope, heads, qk, m_.rope, lengths, m_.inv_freq, RopeStyle::interleaved);

        Tensor attended = rows(heads * m_.v_head);  // every (token, head) written
        causal_attention(q.data_as<float>(), keys, values, heads, heads, qk, m_.v_head, lengths, m_.scale,
                         attended.data_as<float>());
        std::vector<float> out(static_cast<std::size_t>(t * h));
        linear_into(attended.data_as<float>(), t, weight("self_attn.o_proj.weight", {h, heads * m_.v_head}).data(), h,
                    heads * m_.v_head, out.data());
        return out;
    }

    const MlaSpec& m_;
    std::int64_t hidden_;
    float eps_;
};

}  // namespace

std::unique_ptr<DecoderForward> make_mla_decoder(const ModelConfig& config, const Checkpoint& checkpoint, const ModelPlan& plan) {
    DecoderSpec spec = decoder_spec_from_config(config, checkpoint);
    if (config.model_type() == "glm_moe_dsa" && !config.find("rms_norm_eps")) spec.eps = 1e-5f;  // GlmMoeDsaConfig's
    spec.shared_experts = "mlp.shared_experts.";
    spec.shared_intermediate = plan.expert_intermediate_size * config.int_or("n_shared_experts", 1);
    auto m = std::make_shared<const MlaSpec>(mla_from_config(config));
    return make_prenorm_decoder(std::move(spec), checkpoint, plan, [m, &checkpoint, &plan](const DecoderSpec& s, std::int64_t index) {
        return std::make_unique<MlaLayer>(s, *m, checkpoint, plan, index);
    });
}

}  // namespace moequant::adapters
