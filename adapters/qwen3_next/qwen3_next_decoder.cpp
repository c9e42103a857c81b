#include "qwen3_next_decoder.hpp"

#include "config_counts.hpp"
#include "rope_settings.hpp"

#include <moequant/error.hpp>
#include <moequant/parallel.hpp>

#include <cmath>
#include <numeric>

namespace moequant::adapters {

namespace {

struct NextSpec {
    // Gated attention
    std::int64_t heads = 0, kv_heads = 0, head_dim = 0, rotary_dim = 0;
    std::vector<float> inv_freq;
    // Gated DeltaNet
    std::int64_t key_heads = 0, value_heads = 0, key_dim = 0, value_dim = 0, conv_kernel = 4;
    // Qwen3.5: separate in_proj_qkv (q | k | v contiguous), in_proj_z, in_proj_b, in_proj_a
    // instead of Qwen3-Next's per-key-head grouped in_proj_qkvz / in_proj_ba.
    bool split_projections = false;
    std::vector<bool> full_attention;  // per layer
};

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

class GatedAttentionLayer final : public PreNormDecoderLayer {
public:
    GatedAttentionLayer(const DecoderSpec& spec, const NextSpec& n, const Checkpoint& c, const ModelPlan& p, std::int64_t i)
        : PreNormDecoderLayer(spec, c, p, i), n_(n), hidden_(spec.hidden), eps_(spec.eps) {}

private:
    std::vector<float> mix(const std::vector<float>& x, std::span<const std::int64_t> lengths) const override {
        const std::int64_t t = std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0});
        const std::int64_t h = hidden_, hq = n_.heads, hk = n_.kv_heads, d = n_.head_dim;
        // q_proj gives per head [query (d) | gate (d)].
        const std::vector<float> qg = linear(x, t, weight("self_attn.q_proj.weight", {2 * hq * d, h}), 2 * hq * d, h);
        std::vector<float> q(static_cast<std::size_t>(t * hq * d)), gate(q.size());
        for (std::int64_t r = 0; r < t * hq; ++r) {
            std::copy_n(qg.data() + r * 2 * d, d, q.data() + r * d);
            std::copy_n(qg.data() + r * 2 * d + d, d, gate.data() + r * d);
        }
        std::vector<float> k = linear(x, t, weight("self_attn.k_proj.weight", {hk * d, h}), hk * d, h);
        const std::vector<float> v = linear(x, t, weight("self_attn.v_proj.weight", {hk * d, h}), hk * d, h);
        rms_norm(q.data(), t * hq, d, weight("self_attn.q_norm.weight", {d}).data(), eps_, true, q.data());
        rms_norm(k.data(), t * hk, d, weight("self_attn.k_norm.weight", {d}).data(), eps_, true, k.data());
        apply_rope(q.data(), hq, d, n_.rotary_dim, lengths, n_.inv_freq, RopeStyle::rotate_half);
        apply_rope(k.data(), hk, d, n_.rotary_dim, lengths, n_.inv_freq, RopeStyle::rotate_half);
        std::vector<float> attended(q.size());
        causal_attention(q.data(), k.data(), v.data(), hq, hk, d, d, lengths, 1.0f / std::sqrt(static_cast<float>(d)),
                         attended.data());
        for (std::size_t i = 0; i < attended.size(); ++i) attended[i] *= sigmoid(gate[i]);
        return linear(attended, t, weight("self_attn.o_proj.weight", {h, hq * d}), h, hq * d);
    }

    const NextSpec& n_;
    std::int64_t hidden_;
    float eps_;
};

class DeltaNetLayer final : public PreNormDecoderLayer {
public:
    DeltaNetLayer(const DecoderSpec& spec, const NextSpec& n, const Checkpoint& c, const ModelPlan& p, std::int64_t i)
        : PreNormDecoderLayer(spec, c, p, i), n_(n), hidden_(spec.hidden), eps_(spec.eps) {}

private:
    std::vector<float> mix(const std::vector<float>& x, std::span<const std::int64_t> lengths) const override {
        const std::int64_t t = std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0});
        const std::int64_t h = hidden_, nk = n_.key_heads, nv = n_.value_heads, dk = n_.key_dim, dv = n_.value_dim;
        const std::int64_t ratio = nv / nk, key_width = nk * dk, value_width = nv * dv;
        const std::int64_t conv_width = 2 * key_width + value_width, kernel = n_.conv_kernel;
        // The convolution's input [q | k | v] (conv_width channels), z, and b / a per value head.
        std::vector<float> mixed, z, b, a;
        if (n_.split_projections) {
            mixed = linear(x, t, weight("linear_attn.in_proj_qkv.weight", {conv_width, h}), conv_width, h);
            z = linear(x, t, weight("linear_attn.in_proj_z.weight", {value_width, h}), value_width, h);
            b = linear(x, t, weight("linear_attn.in_proj_b.weight", {nv, h}), nv, h);
            a = linear(x, t, weight("linear_attn.in_proj_a.weight", {nv, h}), nv, h);
        } else {
            ungroup(x, t, mixed, z, b, a);
        }
        // Causal depthwise convolution (per sample, zeros before its start), then SiLU.
        const std::vector<float>& conv = weight("linear_attn.conv1d.weight", {conv_width, 1, kernel});
        std::vector<float> activated(mixed.size());
        std::int64_t start = 0;
        for (std::int64_t n : lengths) {
            for (std::int64_t i = 0; i < n; ++i)
                for (std::int64_t c = 0; c < conv_width; ++c) {
                    float sum = 0;
                    for (std::int64_t j = 0; j < kernel; ++j) {
                        const std::int64_t src = i + j - (kernel - 1);
                        if (src >= 0) sum += conv[c * kernel + j] * mixed[(start + src) * conv_width + c];
                    }
                    activated[(start + i) * conv_width + c] = sum * sigmoid(sum);
                }
            start += n;
        }
        const std::vector<float>& a_log = weight("linear_attn.A_log", {nv});
        const std::vector<float>& dt_bias = weight("linear_attn.dt_bias", {nv});
        // The gated delta rule per sample and value head, with its own [dk, dv] state.
        std::vector<float> core(static_cast<std::size_t>(t * value_width));
        std::vector<std::int64_t> starts;
        start = 0;
        for (std::int64_t n : lengths) {
            starts.push_back(start);
            start += n;
        }
        const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
        parallel_for(0, lengths.size() * static_cast<std::size_t>(nv), 1, [&](std::size_t first, std::size_t last) {
            std::vector<float> state(static_cast<std::size_t>(dk * dv)), q(static_cast<std::size_t>(dk)), k(q.size()), mem(static_cast<std::size_t>(dv));
            for (std::size_t task = first; task < last; ++task) {
                const std::size_t s = task / static_cast<std::size_t>(nv);
                const std::int64_t head = static_cast<std::int64_t>(task % static_cast<std::size_t>(nv)), kh = head / ratio;
                std::fill(state.begin(), state.end(), 0.0f);
                for (std::int64_t i = starts[s]; i < starts[s] + lengths[s]; ++i) {
                    const float* row = activated.data() + i * conv_width;
                    auto l2 = [&](const float* src, std::vector<float>& dst, float scale) {
                        float sum = 0;
                        for (std::int64_t d = 0; d < dk; ++d) sum += src[d] * src[d];
                        const float inv = 1.0f / std::sqrt(sum + 1e-6f);
                        for (std::int64_t d = 0; d < dk; ++d) dst[d] = src[d] * inv * scale;
                    };
                    l2(row + kh * dk, q, q_scale);
                    l2(row + key_width + kh * dk, k, 1.0f);
                    const float* v = row + 2 * key_width + head * dv;
                    const float beta = sigmoid(b[i * nv + head]);
                    const float g = -std::exp(a_log[head]) * softplus(a[i * nv + head] + dt_bias[head]);
                    const float decay = std::exp(g);
                    for (auto& s_ : state) s_ *= decay;
                    std::fill(mem.begin(), mem.end(), 0.0f);
                    for (std::int64_t r = 0; r < dk; ++r)
                        for (std::int64_t c = 0; c < dv; ++c) mem[c] += state[r * dv + c] * k[r];
                    for (std::int64_t c = 0; c < dv; ++c) mem[c] = (v[c] - mem[c]) * beta;  // delta
                    for (std::int64_t r = 0; r < dk; ++r)
                        for (std::int64_t c = 0; c < dv; ++c) state[r * dv + c] += k[r] * mem[c];
                    float* out = core.data() + i * value_width + head * dv;
                    for (std::int64_t c = 0; c < dv; ++c) out[c] = 0;
                    for (std::int64_t r = 0; r < dk; ++r)
                        for (std::int64_t c = 0; c < dv; ++c) out[c] += state[r * dv + c] * q[r];
                }
            }
        });
        // Gated RMSNorm per value head (plain weight), times silu(z).
        const std::vector<float>& norm = weight("linear_attn.norm.weight", {dv});
        rms_norm(core.data(), t * nv, dv, norm.data(), eps_, false, core.data());
        for (std::size_t i = 0; i < core.size(); ++i) core[i] *= z[i] * sigmoid(z[i]);
        return linear(core, t, weight("linear_attn.out_proj.weight", {h, value_width}), h, value_width);
    }

    // Qwen3-Next: qkvz and ba grouped per key head, [q (dk) | k (dk) | v (ratio dv) | z (ratio dv)]
    // and [b (ratio) | a (ratio)], rearranged into the contiguous form.
    void ungroup(const std::vector<float>& x, std::int64_t t, std::vector<float>& mixed, std::vector<float>& z,
                 std::vector<float>& b, std::vector<float>& a) const {
        const std::int64_t h = hidden_, nk = n_.key_heads, nv = n_.value_heads, dk = n_.key_dim, dv = n_.value_dim;
        const std::int64_t ratio = nv / nk, qkvz_width = 2 * nk * dk + 2 * nv * dv, key_width = nk * dk, value_width = nv * dv;
        const std::int64_t conv_width = 2 * key_width + value_width;
        const std::vector<float> qkvz = linear(x, t, weight("linear_attn.in_proj_qkvz.weight", {qkvz_width, h}), qkvz_width, h);
        const std::vector<float> ba = linear(x, t, weight("linear_attn.in_proj_ba.weight", {2 * nv, h}), 2 * nv, h);
        mixed.resize(static_cast<std::size_t>(t * conv_width));
        z.resize(static_cast<std::size_t>(t * value_width));
        b.resize(static_cast<std::size_t>(t * nv));
        a.resize(b.size());
        const std::int64_t group = 2 * dk + 2 * ratio * dv;
        for (std::int64_t i = 0; i < t; ++i)
            for (std::int64_t g = 0; g < nk; ++g) {
                const float* src = qkvz.data() + i * qkvz_width + g * group;
                float* row = mixed.data() + i * conv_width;
                std::copy_n(src, dk, row + g * dk);
                std::copy_n(src + dk, dk, row + key_width + g * dk);
                std::copy_n(src + 2 * dk, ratio * dv, row + 2 * key_width + g * ratio * dv);
                std::copy_n(src + 2 * dk + ratio * dv, ratio * dv, z.data() + i * value_width + g * ratio * dv);
                const float* bsrc = ba.data() + i * 2 * nv + g * 2 * ratio;
                std::copy_n(bsrc, ratio, b.data() + i * nv + g * ratio);
                std::copy_n(bsrc + ratio, ratio, a.data() + i * nv + g * ratio);
            }
    }

    const NextSpec& n_;
    std::int64_t hidden_;
    float eps_;
};

[[noreturn]] void config_error(const ModelConfig& config, const std::string& message) {
    throw Error(ErrorKind::input, message, {.file = config.source(), .code = "InvalidConfig"});
}

NextSpec next_from_config(const ModelConfig& config) {
    NextSpec n;
    n.split_projections = is_qwen3_5_moe(config);
    n.heads = positive_int(config, "num_attention_heads");
    n.kv_heads = positive_int_or(config, "num_key_value_heads", n.heads);
    n.head_dim = positive_int_or(config, "head_dim", config.require_int("hidden_size") / n.heads);
    // Qwen3.5's M-RoPE (mrope_section, mrope_interleaved) rotates by three position streams;
    // text-only inputs make the three equal, and then it is this plain RoPE.
    if (auto type = config.find("rope_parameters.rope_type"); type && type->is_string() && type->as_string() != "default")
        config_error(config, "rope_parameters.rope_type '" + type->as_string() +
                                 "' is not supported by the Qwen3-Next / Qwen3.5 forward (only 'default')");
    const double partial = rope_setting(config, "partial_rotary_factor", 0.25);
    const double theta = rope_setting(config, "rope_theta", 10000.0);
    n.rotary_dim = static_cast<std::int64_t>(static_cast<double>(n.head_dim) * partial);
    n.inv_freq = rope_inverse_frequencies(theta, n.rotary_dim);
    n.key_heads = positive_int(config, "linear_num_key_heads");
    n.value_heads = positive_int(config, "linear_num_value_heads");
    n.key_dim = positive_int(config, "linear_key_head_dim");
    n.value_dim = positive_int(config, "linear_value_head_dim");
    n.conv_kernel = positive_int_or(config, "linear_conv_kernel_dim", 4);
    if (n.value_heads % n.key_heads != 0) config_error(config, "linear_num_value_heads is not a multiple of linear_num_key_heads");
    const std::int64_t layers = config.require_int("num_hidden_layers");
    const auto types = config.find("layer_types");
    const bool listed = types && types->is_array();
    if (listed && static_cast<std::int64_t>(types->size()) != layers)
        config_error(config, "layer_types lists " + std::to_string(types->size()) + " layers, but num_hidden_layers is " +
                                 std::to_string(layers));
    const std::int64_t interval = positive_int_or(config, "full_attention_interval", 4);
    for (std::int64_t l = 0; l < layers; ++l) {
        bool full = (l + 1) % interval == 0;
        if (listed) {
            const std::string type = types->at(static_cast<std::size_t>(l)).as_string();
            if (type != "full_attention" && type != "linear_attention")
                config_error(config, "layer_types[" + std::to_string(l) + "] is '" + type +
                                         "' (expected linear_attention or full_attention)");
            full = type == "full_attention";
        }
        n.full_attention.push_back(full);
    }
    return n;
}

}  // namespace

bool is_qwen3_5_moe(const ModelConfig& config) {
    const auto root = config.root().get("model_type");
    return config.model_type() == "qwen3_5_moe_text" || (root && root->is_string() && root->as_string() == "qwen3_5_moe");
}

std::unique_ptr<DecoderForward> make_qwen3_next_decoder(const ModelConfig& config, const Checkpoint& checkpoint,
                                                        const ModelPlan& plan) {
    DecoderSpec spec = decoder_spec_from_config(config, checkpoint);
    spec.zero_centred_norms = true;
    spec.shared_experts = "mlp.shared_expert.";
    spec.shared_intermediate = config.int_or("shared_expert_intermediate_size", plan.expert_intermediate_size);
    spec.shared_expert_gate = "mlp.shared_expert_gate.weight";
    auto n = std::make_shared<const NextSpec>(next_from_config(config));
    return make_prenorm_decoder(std::move(spec), checkpoint, plan,
                                [n, &checkpoint, &plan](const DecoderSpec& s, std::int64_t index) -> std::unique_ptr<DecoderLayerForward> {
                                    if (n->full_attention.at(static_cast<std::size_t>(index)))
                                        return std::make_unique<GatedAttentionLayer>(s, *n, checkpoint, plan, index);
                                    return std::make_unique<DeltaNetLayer>(s, *n, checkpoint, plan, index);
                                });
}

}  // namespace moequant::adapters
