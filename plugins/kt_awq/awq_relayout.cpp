#include "awq_relayout.hpp"

#include "awq_decode.hpp"  // AutoAWQ's pack order (encodings/awq)

#include <moequant/parallel.hpp>

#include <array>
#include <cstring>

namespace moequant::kt_awq {
namespace {

std::uint32_t read_word(const std::byte* words, std::int64_t index) noexcept {
    std::uint32_t w;
    std::memcpy(&w, words + index * 4, 4);
    return w;
}

// The eight 4-bit values of an AutoAWQ word, by column 8j + m.
std::array<std::uint32_t, 8> awq_columns(std::uint32_t word) noexcept {
    std::array<std::uint32_t, 8> v{};
    for (int m = 0; m < 8; ++m) v[static_cast<std::size_t>(m)] = (word >> (4 * encodings::awq_nibble_of_column[static_cast<std::size_t>(m)])) & 0xF;
    return v;
}

}  // namespace

void relay_awq_weight(const std::byte* qweight, std::int64_t k, std::int64_t n, std::int32_t* out) {
    const std::int64_t words_per_row = n / 8, out_words_per_row = k / 8;
    // One task per group of eight input rows: it reads their words and fills output word j of
    // every output row.
    parallel_for(0, static_cast<std::size_t>(out_words_per_row), 16, [&](std::size_t first, std::size_t last) {
        for (auto j = static_cast<std::int64_t>(first); j < static_cast<std::int64_t>(last); ++j)
            for (std::int64_t w = 0; w < words_per_row; ++w) {
                std::array<std::uint32_t, 8> packed{};  // output rows 8w .. 8w+7, word j
                for (int p = 0; p < 8; ++p) {
                    const auto v = awq_columns(read_word(qweight, (8 * j + p) * words_per_row + w));
                    for (int m = 0; m < 8; ++m) packed[static_cast<std::size_t>(m)] |= v[static_cast<std::size_t>(m)] << (4 * p);
                }
                for (int m = 0; m < 8; ++m)
                    out[(8 * w + m) * out_words_per_row + j] = static_cast<std::int32_t>(packed[static_cast<std::size_t>(m)]);
            }
    });
}

void relay_awq_zeros(const std::byte* qzeros, std::int64_t groups, std::int64_t n, std::int32_t* out) {
    const std::int64_t words_per_row = n / 8;
    for (std::int64_t g = 0; g < groups; ++g)
        for (std::int64_t w = 0; w < words_per_row; ++w) {
            const auto v = awq_columns(read_word(qzeros, g * words_per_row + w));
            std::uint32_t natural = 0;
            for (int m = 0; m < 8; ++m) natural |= v[static_cast<std::size_t>(m)] << (4 * m);
            out[g * words_per_row + w] = static_cast<std::int32_t>(natural);
        }
}

}  // namespace moequant::kt_awq
