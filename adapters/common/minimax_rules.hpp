// What MiniMax-M2 (M2.1, M2.5, M2.7) and MiniMax-M3 share on disk and in their forward: experts
// `block_sparse_moe.experts.E.{w1,w3,w2}` sized by num_local_experts / intermediate_size, an F32
// router `block_sparse_moe.gate.weight` with `block_sparse_moe.e_score_correction_bias` at the
// MoE block's root (not under gate.), sigmoid scores chosen by score + bias and renormalized,
// rotary embeddings on the first rotary_dim of each head, and the chat format.
#pragma once

#include "family_rules.hpp"

namespace moequant::adapters {

// The shared rules; the family sets which layers are MoE and anything else it does differently.
FamilyRules minimax_family_rules(std::string description, std::vector<std::string> model_types,
                                 std::vector<std::string> architectures);

// A boolean config key, `fallback` when absent or null.
bool config_flag(const ModelConfig& config, const char* key, bool fallback);

// rotary_dim, else head_dim x partial_rotary_factor, else head_dim: even and within head_dim,
// else Error(input, InvalidConfig).
std::int64_t partial_rotary_dim(const ModelConfig& config, std::int64_t head_dim);

}  // namespace moequant::adapters
