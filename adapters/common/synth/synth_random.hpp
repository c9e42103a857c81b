// Deterministic pseudo-random numbers for synthetic checkpoints.
//
// Each tensor draws from its own stream, keyed by the seed and the tensor's name, so a tensor's
// values do not depend on which other tensors exist or in which order they are written. Only
// integer arithmetic and IEEE double operations with exactly specified results are used, so
// the bytes are the same on every machine.
#pragma once

#include <cstdint>
#include <string_view>

namespace moequant::adapters {

// FNV-1a, 64 bits.
std::uint64_t stable_hash(std::string_view text) noexcept;

class SynthRandom {
public:
    SynthRandom(std::uint64_t seed, std::string_view stream) noexcept;
    std::uint64_t next() noexcept;  // SplitMix64
    double uniform() noexcept;      // in [0, 1), 53 random bits
    // Approximately standard normal: the sum of 12 uniforms minus 6 (Irwin-Hall). No libm
    // calls, so results are bit-identical everywhere; the tails stop at ±6, which suits weights.
    double normal() noexcept;

private:
    std::uint64_t state_;
};

}  // namespace moequant::adapters
