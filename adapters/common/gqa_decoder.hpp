// Grouped-query attention for the pre-norm decoder (prenorm_decoder.hpp): Qwen3-MoE (q/k
// RMSNorm), Mixtral, GLM-4.5 (q/k/v biases, partial rotary), MiniMax-M2 (q/k RMSNorm over
// the whole projection). q/k/v projections, optional q/k RMSNorm over head_dim or over all
// heads, rotary embeddings on the first rotary_dim of each head, causal softmax attention,
// o_proj.
#pragma once

#include "dense_attention_window.hpp"
#include "prenorm_decoder.hpp"

namespace moequant::adapters {

struct GqaAttentionSpec {
    std::int64_t heads = 0, kv_heads = 0, head_dim = 0, rotary_dim = 0;
    double rope_theta = 10000.0;
    bool qk_norm = false;         // q_norm/k_norm over head_dim before the rotation (Qwen3, MiniMax-M3)
    bool qk_norm_whole = false;   // one q_norm over all heads·head_dim outputs, k_norm likewise (MiniMax-M2)
    bool bias = false;            // q/k/v biases (GLM-4.5)
    RopeStyle rope = RopeStyle::rotate_half;
    std::string prefix = "self_attn.";
    DenseAttentionWindow sparse;  // MiniMax-M3: dense only up to its sparse attention's window
};

// num_attention_heads, num_key_value_heads, head_dim (or hidden/heads), rope_theta; full rotary.
GqaAttentionSpec gqa_attention_from_config(const ModelConfig& config);

std::unique_ptr<DecoderForward> make_gqa_decoder(DecoderSpec spec, GqaAttentionSpec attention, const Checkpoint& checkpoint,
                                                 const ModelPlan& plan);

}  // namespace moequant::adapters
