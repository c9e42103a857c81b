// The decoder forward shared by the grouped-query-attention families (Qwen3-MoE, and as they
// are added Mixtral and GLM-4.5): pre-norm residual blocks, attention with optional q/k RMSNorm
// and biases, rotary embeddings on all or the first dims of each head, and an MLP half that is
// a dense SwiGLU or the plan's MoE block (router, routed experts, optional shared experts).
// Everything a family differs in is a GqaDecoderSpec.
#pragma once

#include <moequant/decoder_forward.hpp>
#include <moequant/layer_ops.hpp>
#include <moequant/model_config.hpp>

#include <memory>
#include <optional>
#include <string>

namespace moequant::adapters {

struct GqaDecoderSpec {
    std::string layer_prefix;        // e.g. "model.layers."
    std::string embed;               // e.g. "model.embed_tokens.weight"
    std::int64_t hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, rotary_dim = 0;
    double rope_theta = 10000.0;
    float eps = 1e-6f;
    bool qk_norm = false;            // q_norm/k_norm over head_dim before the rotation (Qwen3)
    bool attention_bias = false;     // q/k/v biases (GLM-4.5)
    RopeStyle rope = RopeStyle::rotate_half;
    std::string attention = "self_attn.", input_norm = "input_layernorm.weight",
                post_attention_norm = "post_attention_layernorm.weight";
    std::string dense_mlp = "mlp.";  // <prefix>{gate,up,down}_proj.weight of dense layers
    std::int64_t dense_intermediate = 0;
    std::string shared_experts;      // e.g. "mlp.shared_experts." (empty: none)
    std::int64_t shared_intermediate = 0;
};

// Reads the spec's sizes from the config (hidden_size, num_attention_heads, num_key_value_heads,
// head_dim or hidden/heads, rope_theta, rms_norm_eps, intermediate_size) and finds the layer
// prefix in the checkpoint.
GqaDecoderSpec gqa_spec_from_config(const ModelConfig& config, const Checkpoint& checkpoint);

std::unique_ptr<DecoderForward> make_gqa_decoder(GqaDecoderSpec spec, const Checkpoint& checkpoint, const ModelPlan& plan);

}  // namespace moequant::adapters
