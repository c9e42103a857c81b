#include "packed_codes.hpp"

namespace moequant::gptq {

void pack_row(std::span<const std::int8_t> codes, int bits, std::span<std::int32_t> words) noexcept {
    const int per_word = 32 / bits;
    const int offset = 1 << (bits - 1);
    const std::uint32_t mask = (1u << bits) - 1;
    for (std::size_t w = 0; w < words.size(); ++w) {
        std::uint32_t word = 0;
        for (int i = 0; i < per_word; ++i)
            word |= (static_cast<std::uint32_t>(codes[w * per_word + i] + offset) & mask) << (bits * i);
        words[w] = static_cast<std::int32_t>(word);
    }
}

}  // namespace moequant::gptq
