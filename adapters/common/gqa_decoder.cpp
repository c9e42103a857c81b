#include "gqa_decoder.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>

#include <cmath>
#include <numeric>

namespace moequant::adapters {

namespace {

std::vector<float> to_f32(const Tensor& t) {
    std::vector<float> out(t.elements());
    decode_to_f32(t.view(), out);
    return out;
}

class GqaLayer final : public DecoderLayerForward {
public:
    GqaLayer(const GqaDecoderSpec& spec, const Checkpoint& ckpt, const ModelPlan& plan, std::int64_t index)
        : s_(spec), ckpt_(ckpt), plan_(plan), index_(index), prefix_(spec.layer_prefix + std::to_string(index) + ".") {
        for (const auto& l : plan.moe_layers)
            if (l.layer == index) moe_ = &l;
    }

    std::vector<float> attention(std::vector<float>& x, std::span<const std::int64_t> lengths) const override {
        const std::int64_t t = std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0});
        const std::int64_t h = s_.hidden, hq = s_.heads, hk = s_.kv_heads, d = s_.head_dim;
        std::vector<float> normed(x.size());
        rms_norm(x.data(), t, h, weight(s_.input_norm, {h}).data(), s_.eps, false, normed.data());
        const std::string a = prefix_ + s_.attention;
        auto project = [&](const char* name, std::int64_t out) {
            const std::vector<float> bias = s_.attention_bias ? weight(s_.attention + name + ".bias", {out}) : std::vector<float>{};
            return linear(normed, t, weight(s_.attention + name + ".weight", {out, h}), out, h, s_.attention_bias ? &bias : nullptr);
        };
        std::vector<float> q = project("q_proj", hq * d), k = project("k_proj", hk * d), v = project("v_proj", hk * d);
        if (s_.qk_norm) {
            rms_norm(q.data(), t * hq, d, weight(s_.attention + "q_norm.weight", {d}).data(), s_.eps, false, q.data());
            rms_norm(k.data(), t * hk, d, weight(s_.attention + "k_norm.weight", {d}).data(), s_.eps, false, k.data());
        }
        const std::vector<float> inv = rope_inverse_frequencies(s_.rope_theta, s_.rotary_dim);
        apply_rope(q.data(), hq, d, s_.rotary_dim, lengths, inv, s_.rope);
        apply_rope(k.data(), hk, d, s_.rotary_dim, lengths, inv, s_.rope);
        std::vector<float> attended(static_cast<std::size_t>(t * hq * d));
        causal_attention(q.data(), k.data(), v.data(), hq, hk, d, d, lengths, 1.0f / std::sqrt(static_cast<float>(d)),
                         attended.data());
        const std::vector<float> o = linear(attended, t, weight(s_.attention + "o_proj.weight", {h, hq * d}), h, hq * d);
        for (std::size_t i = 0; i < x.size(); ++i) x[i] += o[i];
        std::vector<float> mlp_input(x.size());
        rms_norm(x.data(), t, h, weight(s_.post_attention_norm, {h}).data(), s_.eps, false, mlp_input.data());
        return mlp_input;
    }

    void mlp(const std::vector<float>& in, std::vector<float>& x, const ExpertMatrices& experts, Routing* routing) const override {
        const std::int64_t h = s_.hidden, t = static_cast<std::int64_t>(in.size()) / h;
        if (!moe_) {
            const std::int64_t i = s_.dense_intermediate;
            const std::string m = s_.dense_mlp;
            add(x, swiglu_mlp(in, t, h, weight(m + "gate_proj.weight", {i, h}), weight(m + "up_proj.weight", {i, h}),
                              weight(m + "down_proj.weight", {h, i}), i));
            return;
        }
        RouterSpec spec = plan_.router;
        spec.bf16_logits = false;  // a float32 forward: logits as computed
        const std::int64_t e = plan_.num_experts;
        if (moe_->router_weight.empty())
            throw Error(ErrorKind::input, "layer " + std::to_string(index_) + " has no router weight", {.code = "MissingTensor"});
        const std::vector<float> router = load_f32(ckpt_, moe_->router_weight, plan_.fp8_block, {e, h});
        const std::vector<float> bias = moe_->router_bias.empty() ? std::vector<float>{} : load_f32(ckpt_, moe_->router_bias, {}, {e});
        std::vector<float> y(x.size(), 0.0f);
        const Routing r = add_routed_experts(in, t, h, spec, router, bias, e, [&](std::int64_t expert) {
            const ExpertPlan& p = moe_->experts[static_cast<std::size_t>(expert)];
            auto matrix = [&](Projection proj) {
                if (experts) return to_f32(experts(expert, proj));
                return to_f32(load_expert_matrix(ckpt_, p.weights[static_cast<int>(proj)], plan_.fp8_block));
            };
            return ExpertWeightsF32{matrix(Projection::gate), matrix(Projection::up), matrix(Projection::down),
                                    plan_.expert_intermediate_size};
        }, y);
        if (!s_.shared_experts.empty()) {
            const std::int64_t i = s_.shared_intermediate;
            const std::string m = s_.shared_experts;
            add(y, swiglu_mlp(in, t, h, weight(m + "gate_proj.weight", {i, h}), weight(m + "up_proj.weight", {i, h}),
                              weight(m + "down_proj.weight", {h, i}), i));
        }
        add(x, y);
        if (routing) *routing = r;
    }

private:
    std::vector<float> weight(const std::string& name, const Shape& shape) const {
        return load_f32(ckpt_, prefix_ + name, plan_.fp8_block, shape);
    }
    static void add(std::vector<float>& x, const std::vector<float>& y) {
        for (std::size_t i = 0; i < x.size(); ++i) x[i] += y[i];
    }

    const GqaDecoderSpec& s_;
    const Checkpoint& ckpt_;
    const ModelPlan& plan_;
    std::int64_t index_;
    std::string prefix_;
    const MoeLayerPlan* moe_ = nullptr;
};

class GqaDecoder final : public DecoderForward {
public:
    GqaDecoder(GqaDecoderSpec spec, const Checkpoint& ckpt, const ModelPlan& plan) : s_(std::move(spec)), ckpt_(ckpt), plan_(plan) {}

    std::vector<float> embed(std::span<const std::int32_t> ids) const override {
        const TensorInfo& info = ckpt_.info(s_.embed);
        if (info.shape.size() != 2 || info.shape[1] != s_.hidden)
            throw Error(ErrorKind::input, "is not [vocab, hidden_size]", {.tensor = s_.embed, .code = "ShapeMismatch"});
        const std::int64_t vocab = info.shape[0], h = s_.hidden;
        const TensorView table = ckpt_.view(s_.embed);
        const std::size_t width = static_cast<std::size_t>(h) * dtype_bits(info.dtype) / 8;
        std::vector<float> out(ids.size() * static_cast<std::size_t>(h));
        for (std::size_t i = 0; i < ids.size(); ++i) {
            if (ids[i] < 0 || ids[i] >= vocab)
                throw Error(ErrorKind::input, "token id " + std::to_string(ids[i]) + " is outside the vocabulary of " +
                                                  std::to_string(vocab), {.tensor = s_.embed, .code = "BadToken"});
            const TensorView row{info.dtype, {h}, table.bytes.subspan(static_cast<std::size_t>(ids[i]) * width, width)};
            decode_to_f32(row, std::span<float>(out.data() + i * h, static_cast<std::size_t>(h)));
        }
        return out;
    }

    std::unique_ptr<DecoderLayerForward> layer(std::int64_t index) const override {
        return std::make_unique<GqaLayer>(s_, ckpt_, plan_, index);
    }

private:
    GqaDecoderSpec s_;
    const Checkpoint& ckpt_;
    const ModelPlan& plan_;
};

}  // namespace

GqaDecoderSpec gqa_spec_from_config(const ModelConfig& config, const Checkpoint& checkpoint) {
    GqaDecoderSpec s;
    s.hidden = config.require_int("hidden_size");
    s.heads = config.require_int("num_attention_heads");
    s.kv_heads = config.int_or("num_key_value_heads", s.heads);
    s.head_dim = config.int_or("head_dim", s.hidden / s.heads);
    s.rotary_dim = s.head_dim;
    if (auto theta = config.find("rope_theta"); theta && !theta->is_null()) s.rope_theta = theta->as_double();
    if (auto eps = config.find("rms_norm_eps"); eps && !eps->is_null()) s.eps = static_cast<float>(eps->as_double());
    s.dense_intermediate = config.int_or("intermediate_size", 0);
    for (const char* prefix : {"model.layers.", "model.language_model.layers.", "language_model.model.layers."})
        if (checkpoint.contains(std::string(prefix) + "0." + s.input_norm)) {
            s.layer_prefix = prefix;
            s.embed = std::string(prefix).substr(0, std::string(prefix).size() - 7) + "embed_tokens.weight";
        }
    if (s.layer_prefix.empty())
        throw Error(ErrorKind::input, "no decoder layer 0 (" + s.input_norm + ") in the checkpoint", {.code = "MissingTensor"});
    return s;
}

std::unique_ptr<DecoderForward> make_gqa_decoder(GqaDecoderSpec spec, const Checkpoint& checkpoint, const ModelPlan& plan) {
    return std::make_unique<GqaDecoder>(std::move(spec), checkpoint, plan);
}

}  // namespace moequant::adapters
