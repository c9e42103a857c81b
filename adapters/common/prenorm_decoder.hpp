// The decoder shape every supported family shares: pre-norm residual blocks,
//   h = x + attention(input_norm(x)),  out = h + mlp(post_attention_norm(h)),
// with the MLP a dense SwiGLU or the plan's MoE block (router, routed experts, shared experts,
// optionally scaled by a sigmoid gate as in Qwen3-Next). A family supplies its attention (GQA,
// MLA, ...) as a PreNormDecoderLayer subclass; everything else is DecoderSpec data.
#pragma once

#include <moequant/decoder_forward.hpp>
#include <moequant/layer_ops.hpp>
#include <moequant/model_config.hpp>

#include <functional>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <string>

namespace moequant::adapters {

struct DecoderSpec {
    std::string layer_prefix;      // e.g. "model.layers."
    std::string embed;             // e.g. "model.embed_tokens.weight"
    std::string final_norm;        // e.g. "model.norm.weight" (the layer prefix's sibling)
    bool tie_word_embeddings = false;  // the head is the embedding table when there is no lm_head
    std::int64_t hidden = 0;
    float eps = 1e-6f;
    bool zero_centred_norms = false;  // RMSNorm weight used as (1 + w) (Qwen3-Next)
    std::string input_norm = "input_layernorm.weight", post_attention_norm = "post_attention_layernorm.weight";
    std::string dense_mlp = "mlp.";  // <prefix>{gate,up,down}_proj.weight of dense layers
    std::int64_t dense_intermediate = 0;
    std::string shared_experts;      // e.g. "mlp.shared_experts." (empty: none)
    std::int64_t shared_intermediate = 0;
    std::string shared_expert_gate;  // e.g. "mlp.shared_expert_gate.weight" [1, hidden] (empty: none)
    GatedActivation mlp_activation;  // of the dense and shared MLPs (the routed experts': the plan's)
};

// hidden_size, rms_norm_eps, intermediate_size, and the layer prefix found in the checkpoint.
DecoderSpec decoder_spec_from_config(const ModelConfig& config, const Checkpoint& checkpoint);

class PreNormDecoderLayer : public DecoderLayerForward {
public:
    PreNormDecoderLayer(const DecoderSpec& spec, const Checkpoint& checkpoint, const ModelPlan& plan, std::int64_t index);

    std::vector<float> attention(std::vector<float>& x, std::span<const std::int64_t> sample_lengths) const final;
    void mlp(const std::vector<float>& mlp_input, std::vector<float>& x, const ExpertMatrices& experts,
             Routing* routing) const final;

protected:
    // The family's attention on the normed input [tokens, hidden] -> [tokens, hidden].
    virtual std::vector<float> mix(const std::vector<float>& normed, std::span<const std::int64_t> sample_lengths) const = 0;
    // A tensor of this layer ("self_attn.q_proj.weight") as float32, checked against `shape`.
    // Decoded once per layer object and kept while it lives: the samples run through a layer in
    // batches, and every batch needs the same attention, norm, router and shared weights.
    // (Routed experts are not kept: a layer's experts do not fit in memory as float32.)
    const std::vector<float>& weight(const std::string& name, const Shape& shape) const;
    std::int64_t index() const noexcept { return index_; }

private:
    const DecoderSpec& spec_;
    const Checkpoint& checkpoint_;
    const ModelPlan& plan_;
    std::int64_t index_;
    std::string prefix_;
    const MoeLayerPlan* moe_ = nullptr;
    // Decoded tensors by full name (weight() and the router's).
    const std::vector<float>& decoded(const std::string& name, const Shape& shape) const;
    mutable std::mutex decoded_mutex_;
    mutable std::map<std::string, std::vector<float>> decoded_;
};

// Makes layer `index` with the decoder's spec (the decoder outlives its layers' use).
using LayerFactory = std::function<std::unique_ptr<DecoderLayerForward>(const DecoderSpec& spec, std::int64_t index)>;

// Embedding lookup from spec.embed, layers from `make_layer`, and logits through
// spec.final_norm and the plan's lm_head tensor (spec.embed when tied).
std::unique_ptr<DecoderForward> make_prenorm_decoder(DecoderSpec spec, const Checkpoint& checkpoint, const ModelPlan& plan,
                                                     LayerFactory make_layer);

}  // namespace moequant::adapters
