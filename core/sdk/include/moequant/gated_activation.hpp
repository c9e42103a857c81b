// The activation of a gated MLP (routed experts, shared experts, dense layers): what
// down_proj multiplies is act(gate x, up x), element-wise.
//   silu:           silu(g) * u                                  (most families)
//   clamped_swiglu: g' = min(g, limit), u' = clamp(u, -limit, limit),
//                   (u' + 1) * (g' * sigmoid(alpha * g'))        (MiniMax-M3 "swigluoai", gpt-oss)
// The plan carries the routed experts' one (ModelPlan::expert_activation): the calibration
// Hessian of down_proj and every forward use it.
#pragma once

#include <moequant/export.hpp>

#include <cstdint>
#include <string>

namespace moequant {

enum class GatedActivationKind : std::uint8_t { silu, clamped_swiglu };

struct GatedActivation {
    GatedActivationKind kind = GatedActivationKind::silu;
    float alpha = 1.702f;  // clamped_swiglu: the sigmoid's slope (swiglu_alpha)
    float limit = 7.0f;    // clamped_swiglu: gate <= limit, |up| <= limit (swiglu_limit)
};

// act(gate, up) in float32.
MOEQUANT_API float gated_activation(const GatedActivation& a, float gate, float up) noexcept;

// gate[i] <- act(gate[i], up[i]) in float32, over n values.
MOEQUANT_API void apply_gated_activation(const GatedActivation& a, float* gate, const float* up, std::int64_t n) noexcept;

// The same in a BF16 model's steps: gate and up rounded to BF16 first (the outputs of BF16
// Linears), then every intermediate result rounded to BF16 (nearest even), as a BF16 torch
// module computes it.
MOEQUANT_API void apply_gated_activation_bf16(const GatedActivation& a, float* gate, const float* up, std::int64_t n) noexcept;

// For reports: "silu" or "clamped swiglu (alpha 1.702, limit 7)".
MOEQUANT_API std::string describe_activation(const GatedActivation& a);

}  // namespace moequant
