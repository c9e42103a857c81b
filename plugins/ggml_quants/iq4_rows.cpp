// IQ4_NL and IQ4_XS rows: 4-bit indices into ggml's non-linear 16-entry table. IQ4_NL has one
// fp16 scale per 32 values; IQ4_XS one fp16 scale per 256 with a 6-bit scale per 32. Both match
// ggml's quantize_iq4_nl / quantize_iq4_xs (quantize_row_iq4_nl_impl, 7 trial scales each side),
// which ggml_quantize_chunk uses with and without an importance matrix (without one, x^2
// weighs each value), and dequantize_row_iq4_nl / dequantize_row_iq4_xs.
#include "block_bytes.hpp"
#include "ggml_types.hpp"
#include "quant_search.hpp"
#include "row_codecs.hpp"

#include <algorithm>
#include <cmath>

namespace moequant::ggml_quants {

namespace {

constexpr std::int8_t nonlinear_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                              1,    13,   25,  38,  53,  69,  89,  113};
constexpr int sub = 32;       // values per scale search
constexpr int trials = 7;     // trial inverse scales on each side of the table's end
constexpr int super_xs = 256;  // values per IQ4_XS block
constexpr int nl_block_bytes = 2 + sub / 2;
constexpr int xs_block_bytes = 2 + 2 + super_xs / 64 + super_xs / 2;

int nearest_value(float x) noexcept { return nearest_index(16, nonlinear_values, x); }

// Mean square of the super-block doubled: the imatrix weights' offset.
float doubled_mean_square(const float* x, int count) noexcept {
    float sum = 0;
    for (int j = 0; j < count; ++j) sum += x[j] * x[j];
    return sum * (2.f / static_cast<float>(count));
}

// Weighted least-squares scale of one 32-value block: the scale that maps the peak onto the
// table's first entry, then 2 * trials + 1 inverse scales around it, keeping the best. Returns
// 0 for a block below group_max_eps.
float block_scale(const float* xb, const float* importance, float sigma2) noexcept {
    float weights[sub];
    for (int j = 0; j < sub; ++j)
        weights[j] = importance ? importance[j] * std::sqrt(sigma2 + xb[j] * xb[j]) : xb[j] * xb[j];
    float amax = 0, peak = 0;
    for (int j = 0; j < sub; ++j) {
        const float a = std::fabs(xb[j]);
        if (a > amax) {
            amax = a;
            peak = xb[j];
        }
    }
    if (amax < group_max_eps) return 0;
    const float first = static_cast<float>(nonlinear_values[0]);
    // Sums of w*q*x and w*q*q over the table entries `inverse` picks.
    auto sums = [&](float inverse, float& sumqx, float& sumq2) {
        sumqx = sumq2 = 0;
        for (int j = 0; j < sub; ++j) {
            const float q = static_cast<float>(nonlinear_values[nearest_value(inverse * xb[j])]);
            sumqx += weights[j] * q * xb[j];
            sumq2 += weights[j] * q * q;
        }
    };
    float sumqx, sumq2;
    sums(1 / (-peak / first), sumqx, sumq2);
    float d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int step = -trials; step <= trials; ++step) {
        sums(static_cast<float>(step + nonlinear_values[0]) / peak, sumqx, sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

// Indices of `count` values under scale d (0 gives inverse 0: every value to the entry nearest 0).
void indices_for(const float* x, int count, float d, std::uint8_t* levels) noexcept {
    const float id = d != 0.0f ? 1 / d : 0.f;
    for (int j = 0; j < count; ++j) levels[j] = static_cast<std::uint8_t>(nearest_value(id * x[j]));
}

void dequantize_sub(const std::uint8_t* qs, float d, float* y) noexcept {
    std::uint8_t levels[sub];
    unpack_nibbles32(qs, levels);
    for (int j = 0; j < sub; ++j) y[j] = d * static_cast<float>(nonlinear_values[levels[j]]);
}

// ---- The code grids (ggml_types.hpp): the table's levels times the block's d (IQ4_NL, one group
// of 32) or each sub-block's d * (l - 32) (IQ4_XS, 8 groups of 32).
void nl_grid_read(const std::uint8_t* block, float* step, float* offset) noexcept {
    step[0] = get_f16(block);
    offset[0] = 0.0f;
}

void nl_grid_write(const int* codes, std::uint8_t* block) noexcept {
    std::uint8_t levels[sub];
    for (int j = 0; j < sub; ++j) levels[j] = static_cast<std::uint8_t>(codes[j]);
    pack_nibbles32(levels, block + 2);
}

void xs_grid_read(const std::uint8_t* block, float* step, float* offset) noexcept {
    constexpr int subs = super_xs / sub;
    const float d = get_f16(block);
    const int scales_high = block[2] | (block[3] << 8);
    for (int ib = 0; ib < subs; ++ib) {
        const int l = ((block[4 + ib / 2] >> (4 * (ib % 2))) & 0xf) | (((scales_high >> (2 * ib)) & 3) << 4);
        step[ib] = d * static_cast<float>(l - 32);
        offset[ib] = 0.0f;
    }
}

void xs_grid_write(const int* codes, std::uint8_t* block) noexcept {
    constexpr int subs = super_xs / sub;
    std::uint8_t levels[sub];
    for (int ib = 0; ib < subs; ++ib) {
        for (int j = 0; j < sub; ++j) levels[j] = static_cast<std::uint8_t>(codes[ib * sub + j]);
        pack_nibbles32(levels, block + 4 + subs / 2 + ib * (sub / 2));
    }
}

}  // namespace

const CodeGrid iq4_nl_grid{sub, 0, 15, nl_grid_read, nl_grid_write, nonlinear_values};
const CodeGrid iq4_xs_grid{sub, 0, 15, xs_grid_read, xs_grid_write, nonlinear_values};

void quantize_row_iq4_nl(const float* x, std::uint8_t* out, std::int64_t n, const float* importance) {
    std::uint8_t levels[sub];
    for (std::int64_t at = 0; at < n; at += sub, out += nl_block_bytes) {
        const float* xb = x + at;
        const float d = block_scale(xb, importance ? importance + at : nullptr, doubled_mean_square(xb, sub));
        put_f16(out, d);
        indices_for(xb, sub, d, levels);
        pack_nibbles32(levels, out + 2);
    }
}

void dequantize_row_iq4_nl(const std::uint8_t* in, float* y, std::int64_t n) {
    for (std::int64_t at = 0; at < n; at += sub, in += nl_block_bytes) dequantize_sub(in + 2, get_f16(in), y + at);
}

// IQ4_XS block: d (fp16), the scales' high two bits (2 per sub-block, little-endian u16), their
// low nibbles (2 sub-blocks per byte), then 8 x 16 bytes of nibbles. Sub-block scales are
// d * (l - 32), l in 0..63, d = -(largest-magnitude sub-block scale) / 32.
void quantize_row_iq4_xs(const float* x, std::uint8_t* out, std::int64_t n, const float* importance) {
    constexpr int subs = super_xs / sub;
    float scales[subs];
    std::uint8_t levels[sub];
    for (std::int64_t at = 0; at < n; at += super_xs, out += xs_block_bytes) {
        const float* xs = x + at;
        const float sigma2 = doubled_mean_square(xs, super_xs);
        float amax_scale = 0, max_scale = 0;
        for (int ib = 0; ib < subs; ++ib) {
            scales[ib] = block_scale(xs + ib * sub, importance ? importance + at + ib * sub : nullptr, sigma2);
            if (std::fabs(scales[ib]) > amax_scale) {
                amax_scale = std::fabs(scales[ib]);
                max_scale = scales[ib];
            }
        }
        const float d = -max_scale / 32;
        put_f16(out, d);
        const float id = d != 0.0f ? 1 / d : 0.f;
        std::uint16_t scales_high = 0;
        std::uint8_t* scales_low = out + 4;
        std::uint8_t* qs = out + 4 + subs / 2;
        for (int ib = 0; ib < subs; ++ib) {
            const int l = std::max(-32, std::min(31, nearest_int(id * scales[ib])));
            indices_for(xs + ib * sub, sub, d * static_cast<float>(l), levels);
            pack_nibbles32(levels, qs + ib * (sub / 2));
            const int stored = l + 32;
            if (ib % 2 == 0) scales_low[ib / 2] = static_cast<std::uint8_t>(stored & 0xf);
            else scales_low[ib / 2] = static_cast<std::uint8_t>(scales_low[ib / 2] | ((stored & 0xf) << 4));
            scales_high = static_cast<std::uint16_t>(scales_high | ((stored >> 4) << (2 * ib)));
        }
        put_u16(out + 2, scales_high);
    }
}

void dequantize_row_iq4_xs(const std::uint8_t* in, float* y, std::int64_t n) {
    constexpr int subs = super_xs / sub;
    for (std::int64_t at = 0; at < n; at += super_xs, in += xs_block_bytes) {
        const float d = get_f16(in);
        const int scales_high = in[2] | (in[3] << 8);
        for (int ib = 0; ib < subs; ++ib) {
            const int l = ((in[4 + ib / 2] >> (4 * (ib % 2))) & 0xf) | (((scales_high >> (2 * ib)) & 3) << 4);
            dequantize_sub(in + 4 + subs / 2 + ib * (sub / 2), d * static_cast<float>(l - 32), y + at + ib * sub);
        }
    }
}

}  // namespace moequant::ggml_quants
