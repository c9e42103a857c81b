// The constants of glibc's expf (2.27 and later; the algorithm of Arm's optimized-routines),
// so that the vector kernels give its bits: exp(x) = 2^(k/32) * p(r), with
// k = round(x * 32/ln 2), r = x * 32/ln 2 - k, 2^(k/32) from a 32-entry table and p a cubic,
// all in double precision, rounded to float once at the end. glibc on a CPU with FMA (the only
// ones our vector tiers run on) uses its FMA build, __expf_fma, whose fused steps the kernels
// repeat one for one: kd = fma(x, 32/ln 2, shift), r = fma(x, 32/ln 2, -(kd - shift)),
// z = fma(r, c0, c1), y = fma(r, c2, 1), y = fma(z, r*r, y) * s. Checked against std::exp for
// all 2^32 floats (docs/speed.md); tests/unit/vector_exp_test.cpp checks a sweep.
#pragma once

#include <cstdint>

namespace moequant::kernels::expf_constants {
namespace {

constexpr double inv_ln2_n = 0x1.71547652b82fep+5;  // 32 / ln 2
constexpr double shift = 0x1.8p+52;                  // adding it rounds to an integer in the low bits
constexpr double c0 = 0x1.c6af84b912394p-20, c1 = 0x1.ebfce50fac4f3p-13, c2 = 0x1.62e42ff0c52d6p-6;
// Lanes whose (bits >> 20) & 0x7ff reaches this (|x| >= 88, inf, NaN) take glibc's own
// special cases: the kernels call std::exp for them.
constexpr std::uint32_t special_top = 0x42b;

// table[i] = bits of 2^(i/32) (rounded to double) minus i << 47, so that adding k << 47 puts
// k / 32's integer part into the exponent.
alignas(64) constexpr std::uint64_t table[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};

}  // namespace
}  // namespace moequant::kernels::expf_constants
