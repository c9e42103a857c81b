#include <moequant/gated_activation.hpp>

#include <moequant/dtype_convert.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>

namespace moequant {
namespace {

float sigmoid(float x) noexcept { return 1.0f / (1.0f + std::exp(-x)); }
float bf16(float v) noexcept { return bf16_to_f32(f32_to_bf16(v)); }

}  // namespace

float gated_activation(const GatedActivation& a, float gate, float up) noexcept {
    if (a.kind == GatedActivationKind::silu) return gate / (1.0f + std::exp(-gate)) * up;
    const float g = std::min(gate, a.limit), u = std::clamp(up, -a.limit, a.limit);
    return (u + 1.0f) * (g * sigmoid(a.alpha * g));
}

void apply_gated_activation(const GatedActivation& a, float* gate, const float* up, std::int64_t n) noexcept {
    if (a.kind == GatedActivationKind::silu) {
        for (std::int64_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
        return;
    }
    for (std::int64_t i = 0; i < n; ++i) gate[i] = gated_activation(a, gate[i], up[i]);
}

// silu as torch's BF16 kernel returns it (computed in float32, rounded once), then the product.
// The clamped form in the order of the reference modules: glu = g * sigmoid(g * alpha), then
// (u + 1) * glu, each step a BF16 tensor.
void apply_gated_activation_bf16(const GatedActivation& a, float* gate, const float* up, std::int64_t n) noexcept {
    if (a.kind == GatedActivationKind::silu) {
        for (std::int64_t i = 0; i < n; ++i) {
            const float g = bf16(gate[i]);
            gate[i] = bf16(bf16(g / (1.0f + std::exp(-g))) * bf16(up[i]));
        }
        return;
    }
    for (std::int64_t i = 0; i < n; ++i) {
        const float g = std::min(bf16(gate[i]), a.limit), u = std::clamp(bf16(up[i]), -a.limit, a.limit);
        const float glu = bf16(g * bf16(sigmoid(bf16(g * a.alpha))));
        gate[i] = bf16(bf16(u + 1.0f) * glu);
    }
}

std::string describe_activation(const GatedActivation& a) {
    if (a.kind == GatedActivationKind::silu) return "silu";
    std::ostringstream s;
    s << "clamped swiglu (alpha " << a.alpha << ", limit " << a.limit << ")";
    return s.str();
}

}  // namespace moequant
