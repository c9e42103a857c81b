// Tensor groups that several families share, for their synthetic checkpoints.
#pragma once

#include "synth_writer.hpp"

#include <array>
#include <string>
#include <vector>

namespace moequant::adapters {

// SwiGLU MLP: "<prefix><gate>.weight" [inter, hidden], up likewise, down [hidden, inter].
void add_swiglu(std::vector<SynthTensor>& t, const std::string& prefix, const std::array<std::string, 3>& names,
                std::int64_t intermediate, std::int64_t hidden, bool fp8);

struct GqaAttention {
    std::int64_t hidden = 0, heads = 0, kv_heads = 0, head_dim = 0;
    std::int64_t q_rows = 0;  // q_proj rows; 0 = heads * head_dim (Qwen3-Next doubles it for its gate)
    bool bias = false;        // q/k/v biases (GLM-4.5)
    bool qk_norm = false;     // q_norm / k_norm over head_dim (Qwen3)
};

// "<prefix>self_attn.{q,k,v,o}_proj.weight" (+ biases, q_norm/k_norm).
void add_gqa_attention(std::vector<SynthTensor>& t, const std::string& prefix, const GqaAttention& a, bool fp8);

// A fused expert pair: "<prefix>mlp.experts.gate_up_proj" and ".down_proj" (no ".weight"), in
// layout A ([E, 2I, H] / [E, H, I]) or B ([E, H, 2I] / [E, I, H]); fused experts are BF16.
void add_fused_experts(std::vector<SynthTensor>& t, const std::string& prefix, std::int64_t experts,
                       std::int64_t intermediate, std::int64_t hidden, bool layout_b);

}  // namespace moequant::adapters
