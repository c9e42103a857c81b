// A MoE layer's router: which experts each token goes to, with what weight
// (model-families.md §5). Families differ only in data, so the router is a RouterSpec that
// the adapter fills from config.json, applied to logits = x W_router^T:
// - softmax (Mixtral, Qwen3-MoE, Qwen3-Next): logits in the model dtype (rounded to BF16),
//   softmax in F32, top-k, optionally renormalized over the k;
// - sigmoid (DeepSeek-V3 "noaux_tc", Kimi-K2, GLM-4.5): logits in F32, s = sigmoid(logits),
//   the choice ranks s + e_score_correction_bias; with n_group > 1 only the topk_group groups
//   with the largest sum of their two best choice values compete (the others are masked with
//   0.0, as the Hugging Face modeling code does); weights are s at the chosen experts,
//   optionally divided by their sum (+1e-20), times routed_scaling_factor.
// Ties go to the lower expert index.
#pragma once

#include <moequant/export.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace moequant {

enum class RouterScoring : std::uint8_t { softmax, sigmoid };

struct RouterSpec {
    RouterScoring scoring = RouterScoring::softmax;
    std::int64_t top_k = 0;          // num_experts_per_tok
    bool normalize = true;           // norm_topk_prob (Mixtral always renormalizes)
    double scaling = 1.0;            // routed_scaling_factor (sigmoid routers)
    std::int64_t groups = 1;         // n_group
    std::int64_t groups_kept = 1;    // topk_group
    bool bf16_logits = true;         // logits rounded to the model dtype before scoring
    bool uses_bias = false;          // e_score_correction_bias shifts the choice (sigmoid routers)
};

// Which experts `tokens` tokens go to: experts[t * top_k + i] ascending by rank (best first),
// weights likewise.
struct Routing {
    std::int64_t tokens = 0;
    std::int64_t top_k = 0;
    std::vector<std::int32_t> experts;
    std::vector<float> weights;
};

// "softmax" or "sigmoid".
MOEQUANT_API const char* router_scoring_name(RouterScoring scoring) noexcept;
// One line for reports, e.g. "sigmoid + bias, top-8 of 8 groups keep 4, normalized, x2.5".
MOEQUANT_API std::string describe_router(const RouterSpec& spec);

// Routes from logits (F32 [tokens, experts], x W^T accumulated in F32). `bias` is [experts]
// F32 when spec.uses_bias, else ignored. Error(input) when the spec does not fit the sizes
// (top_k > experts, experts not divisible into groups, ...).
MOEQUANT_API Routing route_tokens(const RouterSpec& spec, const float* logits, std::int64_t tokens,
                                  std::int64_t experts, const float* bias);

}  // namespace moequant
