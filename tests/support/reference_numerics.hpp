// The numbers tests compare against, written straight from the spec's formulas (never through
// the SDK's conversion code they check): BF16 round-to-nearest-even, FP8 E4M3, E8M0 and E2M1
// decoding, IEEE half (model-families.md §4.1, model-families-2026.md §2.1).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace moequant::test {

// Nearest-even BF16 bits of a float (NaN inputs are not used by the tests).
inline std::uint16_t bf16_round(float f) {
    std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    std::uint32_t upper = u >> 16, lower = u & 0xFFFF;
    if (lower > 0x8000 || (lower == 0x8000 && (upper & 1))) ++upper;
    return static_cast<std::uint16_t>(upper);
}

inline float bf16_value(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

// FP8 E4M3FN: bias 7, subnormals, 0x7F/0xFF NaN (the tests avoid them), no infinities.
inline float e4m3(std::uint8_t b) {
    const int sign = b >> 7, exponent = (b >> 3) & 15, mantissa = b & 7;
    const double m = exponent == 0 ? std::ldexp(mantissa / 8.0, -6) : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
    return static_cast<float>(sign ? -m : m);
}

// IEEE binary16: bias 15, subnormals (infinities and NaNs are not used by the tests).
inline float f16_value(std::uint16_t h) {
    const int sign = h >> 15, exponent = (h >> 10) & 31, mantissa = h & 1023;
    const double m = exponent == 0 ? std::ldexp(mantissa / 1024.0, -14) : std::ldexp(1.0 + mantissa / 1024.0, exponent - 15);
    return static_cast<float>(sign ? -m : m);
}

// Nearest-even IEEE binary16 bits of a float inside F16's range: the value counted in quanta
// of its binade (2^-24 below the normals), rounded by nearbyint (ties to even); a count that
// reaches the next binade carries into the exponent field by itself.
inline std::uint16_t f16_round(float f) {
    const auto sign = static_cast<std::uint16_t>(std::signbit(f) ? 0x8000 : 0);
    const double a = std::fabs(static_cast<double>(f));
    if (a < std::ldexp(1.0, -14)) return static_cast<std::uint16_t>(sign | static_cast<unsigned>(std::nearbyint(std::ldexp(a, 24))));
    const int e = std::ilogb(a);
    const auto quanta = static_cast<unsigned>(std::nearbyint(std::ldexp(a, 10 - e)));  // in [1024, 2048]
    return static_cast<std::uint16_t>(sign | ((static_cast<unsigned>(e + 15) << 10) + quanta - 1024));
}

// E8M0: 2^(e-127), 0xFF NaN.
inline float e8m0(std::uint8_t e) {
    return e == 0xFF ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(std::ldexp(1.0, e - 127));
}

// FP4 E2M1 (OCP MX): sign, 2 exponent bits with bias 1, 1 mantissa bit; exponent 0 is
// subnormal (0 or 0.5). No infinities or NaNs; the largest magnitude is 6.
inline float e2m1(std::uint8_t code) {
    const int sign = (code >> 3) & 1, exponent = (code >> 1) & 3, mantissa = code & 1;
    const double m = exponent == 0 ? mantissa * 0.5 : std::ldexp(1.0 + mantissa / 2.0, exponent - 1);
    return static_cast<float>(sign ? -m : m);
}

}  // namespace moequant::test
