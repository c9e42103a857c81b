#include <moequant/gated_activation.hpp>

#include <moequant/dtype_convert.hpp>
#include <moequant/vector_exp.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
#include <sstream>

namespace moequant {
namespace {

float sigmoid(float x) noexcept { return 1.0f / (1.0f + std::exp(-x)); }
// v rounded to BF16 and widened back: f32_to_bf16's rounding (to nearest even, NaN kept quiet)
// written inline and branch-free, so the activations' loops vectorize; the exported pair cost
// ten calls an element, most of the BF16 activation's time.
inline float bf16(float v) noexcept {
    const auto u = std::bit_cast<std::uint32_t>(v);
    const std::uint32_t rounded = (u & 0x7FFFFFFFu) > 0x7F800000u ? (u | 0x00400000u) : u + 0x7FFFu + ((u >> 16) & 1u);
    return std::bit_cast<float>(rounded & 0xFFFF0000u);
}

// silu's exp(-g) for blocks of gate values at a time (exp_values: std::exp's bits, vectorized),
// g = input(gate[i]); then set(i, &exp(-g)) for each i of the block. The same values as
// std::exp(-g) one at a time.
template <class Input, class Set>
void for_each_block_of_exps(const float* gate, std::int64_t n, Input input, Set set) noexcept {
    constexpr std::int64_t block = 512;
    float e[block];
    for (std::int64_t b0 = 0; b0 < n; b0 += block) {
        const std::int64_t m = std::min(block, n - b0);
        for (std::int64_t i = 0; i < m; ++i) e[i] = -input(gate[b0 + i]);
        exp_values(e, e, static_cast<std::size_t>(m));
        for (std::int64_t i = 0; i < m; ++i) set(b0 + i, e + i);
    }
}

}  // namespace

float gated_activation(const GatedActivation& a, float gate, float up) noexcept {
    if (a.kind == GatedActivationKind::silu) return gate / (1.0f + std::exp(-gate)) * up;
    const float g = std::min(gate, a.limit), u = std::clamp(up, -a.limit, a.limit);
    return (u + 1.0f) * (g * sigmoid(a.alpha * g));
}

void apply_gated_activation(const GatedActivation& a, float* gate, const float* up, std::int64_t n) noexcept {
    if (a.kind == GatedActivationKind::silu) {
        for_each_block_of_exps(gate, n, [](float g) { return g; }, [&](std::int64_t i, const float* e) {
            gate[i] = gate[i] / (1.0f + e[0]) * up[i];
        });
        return;
    }
    for (std::int64_t i = 0; i < n; ++i) gate[i] = gated_activation(a, gate[i], up[i]);
}

// silu as torch's BF16 kernel returns it (computed in float32, rounded once), then the product.
// The clamped form in the order of the reference modules: glu = g * sigmoid(g * alpha), then
// (u + 1) * glu, each step a BF16 tensor.
void apply_gated_activation_bf16(const GatedActivation& a, float* gate, const float* up, std::int64_t n) noexcept {
    if (a.kind == GatedActivationKind::silu) {
        for_each_block_of_exps(gate, n, bf16, [&](std::int64_t i, const float* e) {
            const float g = bf16(gate[i]);
            gate[i] = bf16(bf16(g / (1.0f + e[0])) * bf16(up[i]));
        });
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
