// DeepSeek-V3 / Kimi-K2 multi-head latent attention for the pre-norm decoder
// (model-families.md §5.1, Hugging Face DeepseekV3Attention): q through the q_a/q_b low-rank
// pair with its RMSNorm (or q_proj), k/v from the compressed kv_a projection (c_kv plus one
// rotary key shared by all heads) expanded by kv_b after its RMSNorm; rotary embeddings (YaRN
// frequencies when rope_scaling says so) on the last qk_rope_head_dim dims only, pairs
// interleaved; softmax scale qk_head_dim^-0.5 x mscale^2; rope_theta / rope_scaling or
// transformers 5's rope_parameters. DeepSeek-V3.2 and GLM-5 (index_topk, 2048 when absent) run
// the same dense MLA and refuse samples longer than index_topk, where their sparse attention
// would drop keys (model-families-2026.md §3.1, §3.4).
#pragma once

#include "prenorm_decoder.hpp"

namespace moequant::adapters {

std::unique_ptr<DecoderForward> make_mla_decoder(const ModelConfig& config, const Checkpoint& checkpoint,
                                                 const ModelPlan& plan);

}  // namespace moequant::adapters
