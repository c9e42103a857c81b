// The numbers of MXFP4 (model-families-2026.md §2.1): a row of nibble-packed E2M1 codes, byte j
// holding element 2j in its low nibble and 2j+1 in its high nibble, with one E8M0 scale byte per
// 32 consecutive elements. Each value is LUT[code] x 2^(e-127) as one float32 multiply, exact for
// every scale byte up to 252; larger bytes are screened out before a row is decoded.
#pragma once

#include <cstdint>
#include <optional>

namespace moequant::encodings {

// Elements sharing one scale byte.
inline constexpr std::int64_t mxfp4_block = 32;

// Scale bytes above this one can overflow float32 and BF16 (253, 254) or are NaN (255).
inline constexpr std::uint8_t mxfp4_largest_scale = 252;

// The first block among [first_block, last_block] of a row's scale bytes that must be refused.
std::optional<std::int64_t> first_refused_block(const std::uint8_t* scales, std::int64_t first_block,
                                                std::int64_t last_block) noexcept;

// Columns [col_begin, col_end) of one row as float32 into out[0, col_end - col_begin); `packed`
// and `scales` point at the row's first byte and first scale byte. The blocks the columns touch
// must have passed first_refused_block().
void decode_mxfp4_row(const std::uint8_t* packed, const std::uint8_t* scales, std::int64_t col_begin,
                      std::int64_t col_end, float* out) noexcept;

}  // namespace moequant::encodings
