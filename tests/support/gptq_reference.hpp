// GPTQ INT4 as the spec writes it (model-families-2026.md §2.4), for the tests: the packers of
// AutoGPTQ's and GPTQModel's writers and the dequantization formula, written from the spec and
// the writers' documented behaviour, never through the plugin's code.
#pragma once

#include <cstdint>
#include <vector>

namespace moequant::test {

// One quantized Linear before packing: in-features K, out-features N, G groups.
struct GptqLinear {
    std::int64_t k = 0, n = 0, groups = 0;
    std::vector<std::uint8_t> codes;   // q[k][n] in [0, 15], row-major [K, N]
    std::vector<std::int32_t> zeros;   // the true zero points z[g][n] in [0, 15], [G, N]
    std::vector<float> scales;         // s[g][n] as stored (already rounded to the scale dtype), [G, N]
    std::vector<std::int32_t> g_idx;   // group of input feature k, [K]

    // w[n][k] = s[g(k)][n] x (q[k][n] − z[g(k)][n]): one float32 multiply of an exact difference.
    float value(std::int64_t row, std::int64_t col) const {
        const auto g = static_cast<std::size_t>(g_idx[static_cast<std::size_t>(col)]);
        const auto at = g * static_cast<std::size_t>(n) + static_cast<std::size_t>(row);
        const int q = codes[static_cast<std::size_t>(col * n + row)];
        return scales[at] * static_cast<float>(q - zeros[at]);
    }
};

// qweight [K/8, N]: word (r, n) holds q[8r + j][n] at bit 4j.
inline std::vector<std::int32_t> pack_gptq_qweight(const GptqLinear& l) {
    std::vector<std::uint32_t> words(static_cast<std::size_t>(l.k / 8 * l.n), 0);
    for (std::int64_t k = 0; k < l.k; ++k)
        for (std::int64_t n = 0; n < l.n; ++n)
            words[static_cast<std::size_t>((k / 8) * l.n + n)] |= std::uint32_t{l.codes[static_cast<std::size_t>(k * l.n + n)]}
                                                                   << (4 * (k % 8));
    return {words.begin(), words.end()};
}

// qzeros [G, N/8] of values v[g][n]: word (g, c) holds v[g][8c + j] at bit 4j.
inline std::vector<std::uint32_t> pack_along_n(const std::vector<std::int32_t>& v, std::int64_t groups, std::int64_t n) {
    std::vector<std::uint32_t> words(static_cast<std::size_t>(groups * n / 8), 0);
    for (std::int64_t g = 0; g < groups; ++g)
        for (std::int64_t c = 0; c < n; ++c)
            words[static_cast<std::size_t>(g * (n / 8) + c / 8)] |=
                (static_cast<std::uint32_t>(v[static_cast<std::size_t>(g * n + c)]) & 0xF) << (4 * (c % 8));
    return words;
}

// gptq_v2: the zero points as they are.
inline std::vector<std::int32_t> pack_gptq_qzeros_v2(const GptqLinear& l) {
    const auto w = pack_along_n(l.zeros, l.groups, l.n);
    return {w.begin(), w.end()};
}

// v1 as AutoGPTQ's pack() writes it: every zero minus one, nibble by nibble (its zeros are ≥ 1;
// a zero of 0 would corrupt the word there, so the tests never ask for one).
inline std::vector<std::int32_t> pack_gptq_qzeros_v1_autogptq(const GptqLinear& l) {
    std::vector<std::int32_t> stored(l.zeros);
    for (auto& z : stored) z -= 1;
    const auto w = pack_along_n(stored, l.groups, l.n);
    return {w.begin(), w.end()};
}

// v1 as GPTQModel exports it: its v2 word minus 0x11111111 in 32-bit arithmetic (a zero of 0
// borrows from the next nibble).
inline std::vector<std::int32_t> pack_gptq_qzeros_v1_gptqmodel(const GptqLinear& l) {
    auto w = pack_along_n(l.zeros, l.groups, l.n);
    for (auto& word : w) word -= 0x11111111u;
    return {w.begin(), w.end()};
}

}  // namespace moequant::test
