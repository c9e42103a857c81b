// Decoding a window of an AutoAWQ GEMM weight: w[n][k] = (q[k][n] − z[g][n]) × s[g][n] with
// g = k / group, the integer difference exact, one float32 multiply, then nearest-even BF16 for
// the BF16 target. qweight I32 [K, N/8] and qzeros I32 [G, N/8] pack eight output columns per
// word in AWQ's interleaved order: nibble p (bits 4p..4p+3) holds column 8j + awq_order[p].
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/source_encoding.hpp>

#include <array>
#include <cstdint>
#include <span>

namespace moequant::encodings {

// AutoAWQ's pack order (awq/modules/linear/gemm.py): the column each nibble of a word holds.
inline constexpr std::array<int, 8> awq_order = {0, 2, 4, 6, 1, 3, 5, 7};
// Its inverse: the nibble that holds column 8j + m.
inline constexpr std::array<int, 8> awq_nibble_of_column = {0, 4, 1, 5, 2, 6, 3, 7};

// Writes window.rows() x window.cols() values of the [N, K] weight `w` (recognised by the awq
// encoding) into `out`.
void decode_awq(const Checkpoint& checkpoint, const EncodedWeight& w, const DecodeWindow& window, DecodeTarget target,
                std::span<std::byte> out);

}  // namespace moequant::encodings
