// The integer mapping both GPTQ and RTN use (gptq-compressed-tensors.md §3): the min-max
// observer's BF16 scales and the three roundings between weights and codes. Every function is
// written for bit-exactness with the reference, so each comment says which rounding it mirrors.
#pragma once

#include "gptq_scheme.hpp"

#include <moequant/dtype_convert.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace moequant::gptq {

// §3.1: bf16(absmax / (bit_range / 2)) (symmetric codes: absmax / qmax), absmax over the group with 0 included; an all-zero
// group gets bf16's epsilon 2^-7. `absmax` is the magnitude of a BF16 (or BF16-exact) value.
inline std::uint16_t observer_scale(float absmax, const Scheme& scheme) noexcept {
    const std::uint16_t s = f32_to_bf16(absmax / scheme.scale_divisor());
    return (s & 0x7FFF) == 0 ? std::uint16_t{0x3C00} : s;  // 0x3C00 = 2^-7
}

// Round half to even (torch.round) of a value already clamped to the code range.
inline float round_half_even(float t) noexcept { return std::nearbyint(t); }

// The checkpoint's code for a BF16(-exact) weight: compressed-tensors divides in BF16, so the
// quotient is rounded to BF16 before clamp and round (§3.2; RTN codes and the save-time
// requantization of GPTQ's weights, §4.3).
inline int saved_code(float w, float scale, const Scheme& scheme) noexcept {
    const float t = bf16_to_f32(f32_to_bf16(w / scale));
    return static_cast<int>(round_half_even(std::clamp(t, float(scheme.qmin()), float(scheme.qmax()))));
}

// GPTQ's in-loop code for an F32 working weight: F32 division, clamp, round (§3.2).
inline float loop_code(float w, float scale, const Scheme& scheme) noexcept {
    return round_half_even(std::clamp(w / scale, float(scheme.qmin()), float(scheme.qmax())));
}

// bf16(code * scale): the product of two BF16 values rounded once (dequantization, and
// GPTQ's fake-quantized value).
inline float dequantized(float code, float scale) noexcept { return bf16_to_f32(f32_to_bf16(code * scale)); }

}  // namespace moequant::gptq
