#include "synth_random.hpp"

namespace moequant::adapters {

std::uint64_t stable_hash(std::string_view text) noexcept {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : text) {
        h ^= c;
        h *= 0x100000001b3ull;
    }
    return h;
}

SynthRandom::SynthRandom(std::uint64_t seed, std::string_view stream) noexcept
    : generator_(seed * SplitMix64::golden_gamma ^ stable_hash(stream)) {}

}  // namespace moequant::adapters
