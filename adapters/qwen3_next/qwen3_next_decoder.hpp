// Qwen3-Next's decoder forward (model-families.md §5.2, Hugging Face modeling_qwen3_next):
// zero-centred RMSNorms; "linear_attention" layers run Gated DeltaNet (grouped q/k/v/z and b/a
// projections, causal depthwise conv + SiLU, L2-normed q/k, the gated delta rule per value head,
// a gated RMSNorm, out_proj); "full_attention" layers run gated attention (query and output gate
// from q_proj, zero-centred q/k norms, rotary on the first partial_rotary_factor of each head,
// GQA, output x sigmoid(gate)); MoE with a softmax router and a shared expert scaled by
// sigmoid(shared_expert_gate x). Qwen3.5-MoE runs the same forward with its linear-attention
// projections stored apart (in_proj_qkv with q | k | v contiguous, in_proj_z, in_proj_b,
// in_proj_a) and its rope settings under rope_parameters.
#pragma once

#include "prenorm_decoder.hpp"

namespace moequant::adapters {

// Qwen3.5-MoE: top-level model_type qwen3_5_moe, or a text-only qwen3_5_moe_text config.
bool is_qwen3_5_moe(const ModelConfig& config);

std::unique_ptr<DecoderForward> make_qwen3_next_decoder(const ModelConfig& config, const Checkpoint& checkpoint,
                                                        const ModelPlan& plan);

}  // namespace moequant::adapters
