// DeepSeek-V3 / Kimi-K2 multi-head latent attention for the pre-norm decoder
// (model-families.md §5.1, Hugging Face DeepseekV3Attention): q through the q_a/q_b low-rank
// pair with its RMSNorm (or q_proj), k/v from the compressed kv_a projection (c_kv plus one
// rotary key shared by all heads) expanded by kv_b after its RMSNorm; rotary embeddings (YaRN
// frequencies when rope_scaling says so) on the last qk_rope_head_dim dims only, pairs
// interleaved; softmax scale qk_head_dim^-0.5 x mscale^2. DeepSeek-V3.2 (index_topk in the
// config) runs the same dense MLA and refuses samples longer than index_topk, where its sparse
// attention would drop keys (model-families-2026.md §3.1).
#pragma once

#include "prenorm_decoder.hpp"

namespace moequant::adapters {

std::unique_ptr<DecoderForward> make_mla_decoder(const ModelConfig& config, const Checkpoint& checkpoint,
                                                 const ModelPlan& plan);

}  // namespace moequant::adapters
