// compressed-tensors `pack-quantized` bit packing (gptq-compressed-tensors.md §6.3): code c is
// stored as c + 2^(bits-1); element j of a row takes bits [j*bits, (j+1)*bits) of the row's
// little-endian stream of int32 words.
#pragma once

#include <cstdint>
#include <span>

namespace moequant::gptq {

// Packs one row of `codes` (each in [-2^(bits-1), 2^(bits-1)-1]) into cols*bits/32 words.
void pack_row(std::span<const std::int8_t> codes, int bits, std::span<std::int32_t> words) noexcept;

// The code of element j of a packed row.
inline int packed_code(const std::int32_t* words, std::int64_t j, int bits) noexcept {
    const int per_word = 32 / bits;
    const auto word = static_cast<std::uint32_t>(words[j / per_word]);
    const std::uint32_t u = (word >> (bits * (j % per_word))) & ((1u << bits) - 1);
    return static_cast<int>(u) - (1 << (bits - 1));
}

}  // namespace moequant::gptq
