// MXFP4 rows: blocks of 32 E2M1 values sharing one E8M0 exponent byte, matching ggml's
// quantize_row_mxfp4_ref and dequantize_row_mxfp4. ggml keeps the E2M1 values doubled (as
// integers) and halves the exponent's power of two instead. No importance path, as in
// ggml_quantize_chunk.
#include "block_bytes.hpp"
#include "quant_search.hpp"
#include "row_codecs.hpp"

#include <cmath>
#include <cstring>

namespace moequant::ggml_quants {

namespace {

constexpr int qk = 32;
constexpr int block_bytes = 1 + qk / 2;

// E2M1 code points times two: codes 0..7 positive, 8..15 their negatives (8 is -0).
constexpr std::int8_t doubled_e2m1[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e - 128): half of E8M0's 2^(e - 127), built from bits (e < 2 lands in the subnormals).
float half_power(std::uint8_t e) noexcept {
    const std::uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<std::uint32_t>(e - 1) << 23;
    float value;
    std::memcpy(&value, &bits, 4);
    return value;
}

// The first code whose value times `scale` lies nearest x.
int nearest_code(float x, float scale) noexcept {
    int best = 0;
    float best_error = std::fabs(static_cast<float>(doubled_e2m1[0]) * scale - x);
    for (int i = 1; i < 16; ++i) {
        const float error = std::fabs(static_cast<float>(doubled_e2m1[i]) * scale - x);
        if (error < best_error) {
            best = i;
            best_error = error;
        }
    }
    return best;
}

}  // namespace

void quantize_row_mxfp4(const float* x, std::uint8_t* out, std::int64_t n, const float*) {
    std::uint8_t codes[qk];
    for (std::int64_t at = 0; at < n; at += qk, out += block_bytes) {
        const float* xb = x + at;
        float amax = 0.0f;
        for (int j = 0; j < qk; ++j)
            if (amax < std::fabs(xb[j])) amax = std::fabs(xb[j]);
        // floor(log2 amax) - 2 puts amax within the largest code (6 = 12 / 2) of the scale. The
        // float goes through int, as x86 truncates it (ggml's direct uint8_t cast of a float).
        const std::uint8_t e =
            amax > 0.0f ? static_cast<std::uint8_t>(x86_truncate(std::floor(std::log2(amax)) - 2 + 127)) : 0;
        const float scale = half_power(e);
        out[0] = e;
        for (int j = 0; j < qk; ++j) codes[j] = static_cast<std::uint8_t>(nearest_code(xb[j], scale));
        pack_nibbles32(codes, out + 1);
    }
}

void dequantize_row_mxfp4(const std::uint8_t* in, float* y, std::int64_t n) {
    std::uint8_t codes[qk];
    for (std::int64_t at = 0; at < n; at += qk, in += block_bytes) {
        const float scale = half_power(in[0]);
        unpack_nibbles32(in + 1, codes);
        for (int j = 0; j < qk; ++j) y[at + j] = static_cast<float>(doubled_e2m1[codes[j]]) * scale;
    }
}

void relay_mxfp4_row(const std::uint8_t* codes, const std::uint8_t* scales, std::uint8_t* out, std::int64_t n) noexcept {
    std::uint8_t levels[qk];
    for (std::int64_t block = 0; block < n / qk; ++block, codes += qk / 2, out += block_bytes) {
        for (int k = 0; k < qk / 2; ++k) {
            levels[2 * k] = codes[k] & 0x0f;
            levels[2 * k + 1] = codes[k] >> 4;
        }
        out[0] = scales[block];  // E8M0 as stored: ggml's doubled codes times 2^(e - 128) are the same values
        pack_nibbles32(levels, out + 1);
    }
}

}  // namespace moequant::ggml_quants
