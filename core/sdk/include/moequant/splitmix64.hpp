// SplitMix64 (Steele, Lea, Flood 2014): the one deterministic generator of the tree, for
// synthetic checkpoints, activations, benchmarks and golden inputs. Only integer arithmetic
// and IEEE double additions and multiplications with exactly specified results are used, so
// every draw is bit-identical on every machine; header-only, so plugins may use it too.
#pragma once

#include <cstdint>

namespace moequant {

class SplitMix64 {
public:
    static constexpr std::uint64_t golden_gamma = 0x9E3779B97F4A7C15ull;

    constexpr explicit SplitMix64(std::uint64_t state) noexcept : state_(state) {}

    constexpr std::uint64_t next() noexcept {
        std::uint64_t z = (state_ += golden_gamma);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }

    // Uniform in [0, 1) from the top `Bits` bits of a draw: 53 fills a double's mantissa; 24 is
    // exact in a float (and sums of a few such draws are exact in a double).
    template <int Bits = 53>
    constexpr double uniform() noexcept {
        static_assert(Bits > 0 && Bits <= 53);
        return static_cast<double>(next() >> (64 - Bits)) / static_cast<double>(std::uint64_t{1} << Bits);
    }

    // Approximately standard normal: the sum of `Count` uniforms, added in draw order, centred
    // and scaled to unit variance (Irwin-Hall). No libm calls; the tails stop at
    // ±sqrt(3 · Count).
    template <int Count, int Bits = 53>
    constexpr double irwin_hall() noexcept {
        static_assert(Count == 4 || Count == 12, "the unit-variance scale is spelled out for 4 and 12 draws");
        double sum = 0;
        for (int i = 0; i < Count; ++i) sum += uniform<Bits>();
        const double centred = sum - Count / 2.0;
        return Count == 12 ? centred : centred * 1.7320508075688772;  // sqrt(12 / Count)
    }

private:
    std::uint64_t state_;
};

}  // namespace moequant
