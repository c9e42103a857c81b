// Qwen3-Next's decoder forward (model-families.md §5.2, Hugging Face modeling_qwen3_next):
// zero-centred RMSNorms; "linear_attention" layers run Gated DeltaNet (grouped q/k/v/z and b/a
// projections, causal depthwise conv + SiLU, L2-normed q/k, the gated delta rule per value head,
// a gated RMSNorm, out_proj); "full_attention" layers run gated attention (query and output gate
// from q_proj, zero-centred q/k norms, rotary on the first partial_rotary_factor of each head,
// GQA, output x sigmoid(gate)); MoE with a softmax router and a shared expert scaled by
// sigmoid(shared_expert_gate x).
#pragma once

#include "prenorm_decoder.hpp"

namespace moequant::adapters {

std::unique_ptr<DecoderForward> make_qwen3_next_decoder(const ModelConfig& config, const Checkpoint& checkpoint,
                                                        const ModelPlan& plan);

}  // namespace moequant::adapters
