#include "gqa_decoder.hpp"

#include "config_counts.hpp"

#include <cmath>
#include <numeric>

namespace moequant::adapters {

namespace {

class GqaLayer final : public PreNormDecoderLayer {
public:
    GqaLayer(const DecoderSpec& spec, const GqaAttentionSpec& a, const Checkpoint& ckpt, const ModelPlan& plan, std::int64_t index)
        : PreNormDecoderLayer(spec, ckpt, plan, index), a_(a), hidden_(spec.hidden), eps_(spec.eps),
          zero_centred_(spec.zero_centred_norms) {}

private:
    std::vector<float> mix(const std::vector<float>& normed, std::span<const std::int64_t> lengths) const override {
        check_dense_attention_window(a_.sparse, lengths);
        const std::int64_t t = std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0});
        const std::int64_t h = hidden_, hq = a_.heads, hk = a_.kv_heads, d = a_.head_dim;
        auto project = [&](const char* name, std::int64_t out) {
            const std::vector<float> bias = a_.bias ? weight(a_.prefix + name + ".bias", {out}) : std::vector<float>{};
            return linear(normed, t, weight(a_.prefix + name + ".weight", {out, h}), out, h, a_.bias ? &bias : nullptr);
        };
        std::vector<float> q = project("q_proj", hq * d), k = project("k_proj", hk * d), v = project("v_proj", hk * d);
        if (a_.qk_norm) {
            rms_norm(q.data(), t * hq, d, weight(a_.prefix + "q_norm.weight", {d}).data(), eps_, zero_centred_, q.data());
            rms_norm(k.data(), t * hk, d, weight(a_.prefix + "k_norm.weight", {d}).data(), eps_, zero_centred_, k.data());
        }
        if (a_.qk_norm_whole) {
            rms_norm(q.data(), t, hq * d, weight(a_.prefix + "q_norm.weight", {hq * d}).data(), eps_, false, q.data());
            rms_norm(k.data(), t, hk * d, weight(a_.prefix + "k_norm.weight", {hk * d}).data(), eps_, false, k.data());
        }
        const std::vector<float> inv = rope_inverse_frequencies(a_.rope_theta, a_.rotary_dim);
        apply_rope(q.data(), hq, d, a_.rotary_dim, lengths, inv, a_.rope);
        apply_rope(k.data(), hk, d, a_.rotary_dim, lengths, inv, a_.rope);
        std::vector<float> attended(static_cast<std::size_t>(t * hq * d));
        causal_attention(q.data(), k.data(), v.data(), hq, hk, d, d, lengths, 1.0f / std::sqrt(static_cast<float>(d)),
                         attended.data());
        return linear(attended, t, weight(a_.prefix + "o_proj.weight", {h, hq * d}), h, hq * d);
    }

    const GqaAttentionSpec& a_;
    std::int64_t hidden_;
    float eps_;
    bool zero_centred_;  // q/k norms as every other norm of the model (MiniMax-M3's Gemma norms)
};

}  // namespace

GqaAttentionSpec gqa_attention_from_config(const ModelConfig& config) {
    GqaAttentionSpec a;
    a.heads = positive_int(config, "num_attention_heads");
    a.kv_heads = positive_int_or(config, "num_key_value_heads", a.heads);
    a.head_dim = positive_int_or(config, "head_dim", config.require_int("hidden_size") / a.heads);
    a.rotary_dim = a.head_dim;
    if (auto theta = config.find("rope_theta"); theta && !theta->is_null()) a.rope_theta = theta->as_double();
    return a;
}

std::unique_ptr<DecoderForward> make_gqa_decoder(DecoderSpec spec, GqaAttentionSpec attention, const Checkpoint& checkpoint,
                                                 const ModelPlan& plan) {
    auto a = std::make_shared<const GqaAttentionSpec>(std::move(attention));
    return make_prenorm_decoder(std::move(spec), checkpoint, plan, [a, &checkpoint, &plan](const DecoderSpec& s, std::int64_t index) {
        return std::make_unique<GqaLayer>(s, *a, checkpoint, plan, index);
    });
}

}  // namespace moequant::adapters
