// Decoding a window of a GPTQ weight: w[n][k] = s[g(k)][n] x (q[k][n] − z[g(k)][n]), the
// integer difference exact, one float32 multiply, then nearest-even BF16 for the BF16 target.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/source_encoding.hpp>

#include <cstdint>
#include <span>

namespace moequant::encodings {

// The zero point of v1 qzeros: the whole word plus one in every nibble, carries included.
// GPTQModel writes v1 as its v2 word minus 0x11111111 and reads it back by adding it again,
// so a true zero of 0 (stored 15, with a borrow from the next nibble) round-trips exactly;
// for every word without a stored 15 this is the per-nibble "stored + 1" of AutoGPTQ's
// readers. docs/encodings-gptq.md lists what each reader does with a stored 15.
inline std::uint32_t v1_zero_word(std::uint32_t stored) noexcept { return stored + 0x11111111u; }

// Writes window.rows() x window.cols() values of the [N, K] weight `w` (recognised by the
// gptq encoding) into `out`. Refuses a g_idx entry outside [0, G), naming the tensor and the
// index.
void decode_gptq(const Checkpoint& checkpoint, const EncodedWeight& w, const DecodeWindow& window, DecodeTarget target,
                 std::span<std::byte> out);

}  // namespace moequant::encodings
