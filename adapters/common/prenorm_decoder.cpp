#include "prenorm_decoder.hpp"

#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace moequant::adapters {

namespace {

void add(std::vector<float>& x, const std::vector<float>& y) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

class PreNormDecoder final : public DecoderForward {
public:
    PreNormDecoder(DecoderSpec spec, const Checkpoint& checkpoint, const ModelPlan& plan, LayerFactory make_layer)
        : spec_(std::move(spec)), checkpoint_(checkpoint), make_layer_(std::move(make_layer)), head_(head_name(plan)) {}

    std::vector<float> embed(std::span<const std::int32_t> ids) const override {
        const EncodedWeight& table = checkpoint_.weight(spec_.embed);
        if (table.shape.size() != 2 || table.shape[1] != spec_.hidden)
            throw Error(ErrorKind::input, "is not [vocab, hidden_size]", {.tensor = spec_.embed, .code = "ShapeMismatch"});
        const std::int64_t vocab = table.shape[0], h = spec_.hidden;
        std::vector<float> out(ids.size() * static_cast<std::size_t>(h));
        for (std::size_t i = 0; i < ids.size(); ++i) {
            if (ids[i] < 0 || ids[i] >= vocab)
                throw Error(ErrorKind::input, "token id " + std::to_string(ids[i]) + " is outside the vocabulary of " + std::to_string(vocab),
                            {.tensor = spec_.embed, .code = "BadToken"});
            // One row, decoded by the table's encoding (plain tables: their stored values).
            std::span<float> row(out.data() + i * h, static_cast<std::size_t>(h));
            decode_weight(checkpoint_, table, {.row_begin = ids[i], .row_end = ids[i] + 1, .col_end = h}, DecodeTarget::f32,
                          std::as_writable_bytes(row));
        }
        return out;
    }

    std::unique_ptr<DecoderLayerForward> layer(std::int64_t index) const override { return make_layer_(spec_, index); }

    std::vector<float> logits(std::span<const float> hidden) const override {
        const std::int64_t h = spec_.hidden, rows = static_cast<std::int64_t>(hidden.size()) / h;
        if (head_.empty())
            throw Error(ErrorKind::input, "no lm_head in the checkpoint and tie_word_embeddings is not set",
                        {.file = checkpoint_.directory().string(), .code = "MissingTensor"});
        const EncodedWeight& head = checkpoint_.weight(head_);
        if (head.shape.size() != 2 || head.shape[1] != h)
            throw Error(ErrorKind::input, "is not [vocab, hidden_size]", {.tensor = head_, .code = "ShapeMismatch"});
        const std::vector<float> norm = load_f32(checkpoint_, spec_.final_norm, {h});
        std::vector<float> normed(hidden.size());
        rms_norm(hidden.data(), rows, h, norm.data(), spec_.eps, spec_.zero_centred_norms, normed.data());
        // The head is decoded a block of vocabulary rows at a time: as float32 a real model's
        // head is gigabytes, and each call multiplies only a few rows of hidden states.
        const std::int64_t vocab = head.shape[0], block = 4096;
        std::vector<float> out(static_cast<std::size_t>(rows * vocab));
        std::vector<float> w;
        for (std::int64_t v0 = 0; v0 < vocab; v0 += block) {
            const std::int64_t n = std::min(block, vocab - v0);
            w.resize(static_cast<std::size_t>(n * h));
            decode_weight(checkpoint_, head, {.row_begin = v0, .row_end = v0 + n, .col_end = h}, DecodeTarget::f32,
                          std::as_writable_bytes(std::span<float>(w)));
            const std::vector<float> y = linear(normed, rows, w, n, h);
            for (std::int64_t r = 0; r < rows; ++r)
                std::copy_n(y.data() + r * n, n, out.data() + r * vocab + v0);
        }
        return out;
    }

private:
    DecoderSpec spec_;
    const Checkpoint& checkpoint_;
    LayerFactory make_layer_;
    std::string head_;

    // The plan's lm_head weight (the language model's in a multimodal checkpoint), else the
    // embedding table when tied; empty when neither.
    std::string head_name(const ModelPlan& plan) const {
        std::string found;
        const std::string root = spec_.embed.substr(0, spec_.embed.size() - std::string_view("embed_tokens.weight").size());
        for (const auto& [tensor, role] : plan.roles) {
            if (role != TensorRole::lm_head) continue;
            // The weight the tensor stands for (a GGUF's `lm_head.weight.gguf.q6_K` is lm_head.weight).
            const EncodedWeight* weight = checkpoint_.weight_holding(tensor);
            if (!weight || !weight->name.ends_with(".weight")) continue;
            const std::string& name = weight->name;
            if (found.empty() || (name.starts_with(root) && !found.starts_with(root))) found = name;
        }
        if (found.empty() && spec_.tie_word_embeddings) found = spec_.embed;
        return found;
    }
};

}  // namespace

DecoderSpec decoder_spec_from_config(const ModelConfig& config, const Checkpoint& checkpoint) {
    DecoderSpec s;
    s.hidden = config.require_int("hidden_size");
    if (auto eps = config.find("rms_norm_eps"); eps && !eps->is_null()) s.eps = static_cast<float>(eps->as_double());
    s.dense_intermediate = config.int_or("intermediate_size", 0);
    if (auto tie = config.find("tie_word_embeddings"); tie && tie->is_bool()) s.tie_word_embeddings = tie->as_bool();
    for (const std::string prefix : {"model.layers.", "model.language_model.layers.", "language_model.model.layers."})
        if (checkpoint.contains(prefix + "0." + s.input_norm)) {
            s.layer_prefix = prefix;
            s.embed = prefix.substr(0, prefix.size() - 7) + "embed_tokens.weight";
            s.final_norm = prefix.substr(0, prefix.size() - 7) + "norm.weight";
            break;
        }
    if (s.layer_prefix.empty())
        throw Error(ErrorKind::input, "no decoder layer 0 (" + s.input_norm + ") in the checkpoint",
                    {.file = checkpoint.directory().string(), .code = "MissingTensor"});
    return s;
}

PreNormDecoderLayer::PreNormDecoderLayer(const DecoderSpec& spec, const Checkpoint& checkpoint, const ModelPlan& plan,
                                         std::int64_t index)
    : spec_(spec), checkpoint_(checkpoint), plan_(plan), index_(index), prefix_(spec.layer_prefix + std::to_string(index) + "."),
      moe_(plan.moe_layer(index)) {}

const std::vector<float>& PreNormDecoderLayer::decoded(const std::string& name, const Shape& shape) const {
    std::lock_guard lock(decoded_mutex_);
    auto it = decoded_.find(name);
    if (it == decoded_.end()) {
        it = decoded_.emplace(name, load_f32(checkpoint_, name, shape)).first;
        // Kept as float32 from now on: its mapped pages would only add to the resident memory of
        // every layer run so far.
        for (const auto& [role, tensor] : checkpoint_.weight(name).tensors) checkpoint_.release_pages(tensor);
    }
    return it->second;
}

const std::vector<float>& PreNormDecoderLayer::weight(const std::string& name, const Shape& shape) const {
    return decoded(prefix_ + name, shape);
}

std::vector<float> PreNormDecoderLayer::attention(std::vector<float>& x, std::span<const std::int64_t> lengths) const {
    const std::int64_t h = spec_.hidden, t = static_cast<std::int64_t>(x.size()) / h;
    std::vector<float> normed(x.size());
    rms_norm(x.data(), t, h, weight(spec_.input_norm, {h}).data(), spec_.eps, spec_.zero_centred_norms, normed.data());
    add(x, mix(normed, lengths));
    std::vector<float> mlp_input(x.size());
    rms_norm(x.data(), t, h, weight(spec_.post_attention_norm, {h}).data(), spec_.eps, spec_.zero_centred_norms,
             mlp_input.data());
    return mlp_input;
}

void PreNormDecoderLayer::mlp(const std::vector<float>& in, std::vector<float>& x, const ExpertMatrices& experts,
                              Routing* routing) const {
    const std::int64_t h = spec_.hidden, t = static_cast<std::int64_t>(in.size()) / h;
    auto swiglu_at = [&](const std::string& m, std::int64_t i) {
        return swiglu_mlp(in, t, h, weight(m + "gate_proj.weight", {i, h}), weight(m + "up_proj.weight", {i, h}),
                          weight(m + "down_proj.weight", {h, i}), i, spec_.mlp_activation);
    };
    if (!moe_) {
        add(x, swiglu_at(spec_.dense_mlp, spec_.dense_intermediate));
        return;
    }
    RouterSpec spec = plan_.router;
    spec.bf16_logits = false;  // a float32 forward: logits as computed
    const std::int64_t e = plan_.num_experts;
    if (moe_->router_weight.empty())
        throw Error(ErrorKind::input, "layer " + std::to_string(index_) + " has no router weight", {.code = "MissingTensor"});
    const std::vector<float>& router = decoded(moe_->router_weight, {e, h});
    const std::vector<float> bias = moe_->router_bias.empty() ? std::vector<float>{} : decoded(moe_->router_bias, {e});
    std::vector<float> y(x.size(), 0.0f);
    const Routing r = add_routed_experts(in, t, h, spec, router, bias, e, [&](std::int64_t expert) {
        const ExpertPlan& p = moe_->experts[static_cast<std::size_t>(expert)];
        auto matrix = [&](Projection proj) {
            if (experts) return experts(expert, proj);
            return load_expert_matrix(checkpoint_, p.weights[static_cast<int>(proj)]);
        };
        return ExpertWeights{matrix(Projection::gate), matrix(Projection::up), matrix(Projection::down),
                             plan_.expert_intermediate_size};
    }, y, plan_.expert_activation);
    if (!spec_.shared_experts.empty()) {
        std::vector<float> shared = swiglu_at(spec_.shared_experts, spec_.shared_intermediate);
        if (!spec_.shared_expert_gate.empty()) {  // one sigmoid scalar per token
            const std::vector<float> g = linear(in, t, weight(spec_.shared_expert_gate, {1, h}), 1, h);
            for (std::int64_t r0 = 0; r0 < t; ++r0) {
                const float s = 1.0f / (1.0f + std::exp(-g[r0]));
                for (std::int64_t d = 0; d < h; ++d) shared[r0 * h + d] *= s;
            }
        }
        add(y, shared);
    }
    add(x, y);
    if (routing) *routing = r;
}

std::unique_ptr<DecoderForward> make_prenorm_decoder(DecoderSpec spec, const Checkpoint& checkpoint, const ModelPlan& plan,
                                                     LayerFactory make_layer) {
    return std::make_unique<PreNormDecoder>(std::move(spec), checkpoint, plan, std::move(make_layer));
}

}  // namespace moequant::adapters
