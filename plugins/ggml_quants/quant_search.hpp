// The scale searches ggml's reference quantizers share (ggml src/ggml-quants.c at the commit
// docs/gguf-quants.md pins). GGUF files are only byte-identical to llama-quantize's when every
// float operation happens in ggml's order and precision: each function here keeps that order,
// in float, and this folder is compiled with -ffp-contract=off (no fused multiply-adds) and
// without -ffast-math. Names say what each searches; the ggml function each matches is named
// beside it for the reader who checks one against the other.
#pragma once

#include <cstdint>
#include <cstring>

namespace moequant::ggml_quants {

// Values whose magnitude is below this are "all zero" to the searches (ggml's GROUP_MAX_EPS).
inline constexpr float group_max_eps = 1e-15f;

// Round to nearest, ties to even, by adding 1.5 * 2^23 (ggml's nearest_int); |x| <= 4194303.
// Inline so the per-value requantizing loops vectorize (k_lanes_*.cpp must not call it: a copy
// compiled with their ISA flags could stand in for this one).
inline int nearest_int(float x) noexcept {
    const float shifted = x + 12582912.f;
    std::int32_t bits;
    std::memcpy(&bits, &shifted, 4);
    return (bits & 0x007fffff) - 0x00400000;
}

// Index of the entry of the sorted `values` (n of them) nearest to x; a tie goes to the upper
// entry (ggml's best_index_int8).
int nearest_index(int n, const std::int8_t* values, float x) noexcept;

// Symmetric levels -nmax..nmax-1 for n values, the scale refined over 19 candidate steps to the
// weighted least-squares optimum (ggml's make_qx_quants, rmse_type 1): weights are `weights`,
// or x^2 when null. Writes L[i] = level + nmax; returns the scale (0 when max|x| < group_max_eps).
float symmetric_levels(int n, int nmax, const float* x, std::int8_t* levels, const float* weights) noexcept;

// Symmetric levels -nmax..nmax-1 with x^2 weights, refined one level at a time up to five passes
// (ggml's make_q3_quants with do_rmse). Writes L[i] = level + nmax; returns the scale.
float symmetric_levels_refined(int n, int nmax, const float* x, std::int8_t* levels) noexcept;

// Levels 0..nmax with an offset: scale and minimum chosen over nstep + 1 trial scales by weighted
// least squares, keeping the trial with the smallest weighted error (squared, or absolute with
// `absolute_error`). `*negated_min` receives -min (>= 0). ggml's make_qkx2_quants (a block is
// flat, all levels 0, when max == min) and make_qkx3_quants (flat when max <= min; null
// `weights` means x^2).
struct OffsetSearch {
    float rmin, rdelta;
    int nstep;
    bool absolute_error;
};
float offset_levels_qkx2(int n, int nmax, const float* x, const float* weights, std::uint8_t* levels, float* negated_min,
                         std::uint8_t* scratch, OffsetSearch search) noexcept;
float offset_levels_qkx3(int n, int nmax, const float* x, const float* weights, std::uint8_t* levels, float* negated_min,
                         std::uint8_t* scratch, OffsetSearch search) noexcept;

// Non-negative values x (sub-block scales) to levels 0..nmax of one common scale, weighted by
// `weights` (ggml's make_qp_quants). Returns the scale (0 when max x < group_max_eps).
float positive_levels(int n, int nmax, const float* x, std::uint8_t* levels, const float* weights) noexcept;

// IEEE binary16 bits of x, round to nearest even, every NaN 0x7e00 with x's sign (ggml's
// GGML_FP32_TO_FP16), and back.
std::uint16_t to_f16(float x) noexcept;
float from_f16(std::uint16_t bits) noexcept;

}  // namespace moequant::ggml_quants
