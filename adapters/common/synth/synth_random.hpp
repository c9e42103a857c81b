// Deterministic pseudo-random numbers for synthetic checkpoints.
//
// Each tensor draws from its own stream, keyed by the seed and the tensor's name, so a tensor's
// values do not depend on which other tensors exist or in which order they are written. Only
// integer arithmetic and IEEE double operations with exactly specified results are used, so
// the bytes are the same on every machine.
#pragma once

#include <moequant/splitmix64.hpp>

#include <cstdint>
#include <string_view>

namespace moequant::adapters {

// FNV-1a, 64 bits.
std::uint64_t stable_hash(std::string_view text) noexcept;

class SynthRandom {
public:
    SynthRandom(std::uint64_t seed, std::string_view stream) noexcept;
    std::uint64_t next() noexcept { return generator_.next(); }
    double uniform() noexcept { return generator_.uniform<53>(); }  // in [0, 1), 53 random bits
    // Approximately standard normal: the sum of 12 uniforms minus 6 (Irwin-Hall); the tails
    // stop at ±6, which suits weights.
    double normal() noexcept { return generator_.irwin_hall<12>(); }

private:
    SplitMix64 generator_;
};

}  // namespace moequant::adapters
