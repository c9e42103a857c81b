// Byte-level pieces of ggml's 32-value blocks shared by the legacy, IQ4 and MXFP4 row codecs:
// little-endian fp16 fields and the nibble layout (value j in the low nibble of byte j, value
// j + 16 in the high nibble), written byte by byte so no struct layout is assumed.
#pragma once

#include "quant_search.hpp"

#include <climits>
#include <cstdint>

namespace moequant::ggml_quants {

// A float converted to an integer as ggml's casts do on x86 (cvttss2si: toward zero, and
// INT_MIN for NaN or out of range), without C++'s undefined behaviour for those inputs (a
// block whose scale underflows makes 1/d infinite). Narrower casts take its low bits.
inline int x86_truncate(float value) noexcept {
    return value >= -2147483648.0f && value < 2147483648.0f ? static_cast<int>(value) : INT_MIN;
}

inline void put_u16(std::uint8_t* at, std::uint16_t bits) noexcept {
    at[0] = static_cast<std::uint8_t>(bits & 0xff);
    at[1] = static_cast<std::uint8_t>(bits >> 8);
}

inline void put_f16(std::uint8_t* at, float value) noexcept { put_u16(at, to_f16(value)); }

inline float get_f16(const std::uint8_t* at) noexcept {
    return from_f16(static_cast<std::uint16_t>(at[0] | (at[1] << 8)));
}

// 32 levels (only their low four bits kept) into 16 bytes.
inline void pack_nibbles32(const std::uint8_t* levels, std::uint8_t* qs) noexcept {
    for (int j = 0; j < 16; ++j)
        qs[j] = static_cast<std::uint8_t>((levels[j] & 0x0f) | ((levels[j + 16] & 0x0f) << 4));
}

// The inverse: 16 bytes into 32 four-bit levels.
inline void unpack_nibbles32(const std::uint8_t* qs, std::uint8_t* levels) noexcept {
    for (int j = 0; j < 16; ++j) {
        levels[j] = qs[j] & 0x0f;
        levels[j + 16] = qs[j] >> 4;
    }
}

}  // namespace moequant::ggml_quants
