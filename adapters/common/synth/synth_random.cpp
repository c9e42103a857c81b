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
    : state_(seed * 0x9E3779B97F4A7C15ull ^ stable_hash(stream)) {}

std::uint64_t SynthRandom::next() noexcept {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double SynthRandom::uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double SynthRandom::normal() noexcept {
    double sum = 0;
    for (int i = 0; i < 12; ++i) sum += uniform();
    return sum - 6.0;
}

}  // namespace moequant::adapters
