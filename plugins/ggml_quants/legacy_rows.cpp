// Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 rows: blocks of 32 values with one fp16 scale (and an fp16
// minimum for the _1 types). Without an importance matrix these match ggml's
// quantize_row_q{4_0,4_1,5_0,5_1,8_0}_ref; with one, the per-row quantize_row_q*_impl
// (make_qx_quants for the symmetric types, make_qkx3_quants for the offset ones). Q8_0 ignores
// the importance matrix, as ggml_quantize_chunk does. Dequantizers match dequantize_row_q*.
#include "block_bytes.hpp"
#include "ggml_types.hpp"
#include "k_lanes.hpp"
#include "quant_search.hpp"
#include "row_codecs.hpp"

#include <cmath>
#include <cfloat>
#include <algorithm>

namespace moequant::ggml_quants {

namespace {

constexpr int qk = 32;

// The first value of largest magnitude, with its sign (ggml keeps the sign to pick d's sign).
float signed_peak(const float* xb) noexcept {
    float magnitude = 0.0f, peak = 0.0f;
    for (int j = 0; j < qk; ++j) {
        if (magnitude < std::fabs(xb[j])) {
            magnitude = std::fabs(xb[j]);
            peak = xb[j];
        }
    }
    return peak;
}

// Reference symmetric block (Q4_0 with half = 8, Q5_0 with half = 16): the peak maps to level 0,
// the others round half up from the truncating cast; returns the scale.
float symmetric_block(const float* xb, int half, std::uint8_t* levels) noexcept {
    const float d = signed_peak(xb) / static_cast<float>(-half);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const float offset = static_cast<float>(half) + 0.5f;
    for (int j = 0; j < qk; ++j) {
        const float scaled = xb[j] * id;
        // Truncation toward zero, as ggml's (int8_t) cast; the value is never below -1 here.
        levels[j] = static_cast<std::uint8_t>(std::min(2 * half - 1, x86_truncate(scaled + offset)));
    }
    return d;
}

// Reference offset block (Q4_1: top 15 clamped; Q5_1: top 31, unclamped as in ggml): levels
// from the block minimum; returns the scale, writes the minimum.
float offset_block(const float* xb, int top, bool clamp, std::uint8_t* levels, float* min_out) noexcept {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < qk; ++j) {
        if (xb[j] < min) min = xb[j];
        if (xb[j] > max) max = xb[j];
    }
    const float d = (max - min) / static_cast<float>(top);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < qk; ++j) {
        const float scaled = (xb[j] - min) * id;
        const int l = x86_truncate(scaled + 0.5f);
        levels[j] = static_cast<std::uint8_t>(clamp ? std::min(top, l) : l);
    }
    *min_out = min;
    return d;
}

// The imatrix path weighs column j by importance[j] * sqrt(sigma2 + x[j]^2), sigma2 being the
// row's mean square.
float row_mean_square(const float* x, std::int64_t n) noexcept {
    float sum = 0;
    for (std::int64_t j = 0; j < n; ++j) sum += x[j] * x[j];
    return sum / static_cast<float>(n);
}

void block_weights(const float* xb, const float* importance, float sigma2, float* weights) noexcept {
    for (int j = 0; j < qk; ++j) weights[j] = importance[j] * std::sqrt(sigma2 + xb[j] * xb[j]);
}

// make_qkx3_quants' trial scales for Q4_1 / Q5_1.
constexpr OffsetSearch offset_search{-0.9f, 0.05f, 36, false};

// Q5 blocks keep bit 4 of level j as bit j of a little-endian 32-bit word, before the nibbles.
void put_q5_levels(const std::uint8_t* levels, std::uint8_t* at) noexcept {
    std::uint32_t high = 0;
    for (int j = 0; j < qk; ++j) high |= static_cast<std::uint32_t>((levels[j] >> 4) & 1) << j;
    for (int b = 0; b < 4; ++b) at[b] = static_cast<std::uint8_t>(high >> (8 * b));
    pack_nibbles32(levels, at + 4);
}

void get_q5_levels(const std::uint8_t* at, std::uint8_t* levels) noexcept {
    const std::uint32_t high = static_cast<std::uint32_t>(at[0]) | (static_cast<std::uint32_t>(at[1]) << 8) |
                               (static_cast<std::uint32_t>(at[2]) << 16) | (static_cast<std::uint32_t>(at[3]) << 24);
    unpack_nibbles32(at + 4, levels);
    for (int j = 0; j < qk; ++j) levels[j] = static_cast<std::uint8_t>(levels[j] | (((high >> j) & 1) << 4));
}

// Which half of the family a type is: symmetric (one scale, levels centred on `half`) or
// offset (scale and minimum), and whether bit 4 of the levels is stored.
enum class Family { symmetric, offset };

struct Layout {
    Family family;
    int bits;  // 4 or 5
    int block_bytes() const noexcept { return 2 + (family == Family::offset ? 2 : 0) + (bits == 5 ? 4 : 0) + 16; }
};

void quantize_row(Layout layout, const float* x, std::uint8_t* out, std::int64_t n, const float* importance) {
    const int top = (1 << layout.bits) - 1;
    const int half = 1 << (layout.bits - 1);
    const float sigma2 = importance ? row_mean_square(x, n) : 0.0f;
    std::uint8_t levels[qk], scratch[qk];
    float weights[qk];
    for (std::int64_t at = 0; at < n; at += qk, out += layout.block_bytes()) {
        const float* xb = x + at;
        std::uint8_t* fields = out + 2;
        float d;
        if (layout.family == Family::symmetric) {
            if (importance) {
                block_weights(xb, importance + at, sigma2, weights);
                std::int8_t signed_levels[qk];
                d = symmetric_levels(qk, half, xb, signed_levels, weights);
                for (int j = 0; j < qk; ++j) levels[j] = static_cast<std::uint8_t>(signed_levels[j]);
            } else {
                d = symmetric_block(xb, half, levels);
            }
        } else {
            float min;
            if (importance) {
                block_weights(xb, importance + at, sigma2, weights);
                float negated_min;
                d = offset_levels_qkx3(qk, top, xb, weights, levels, &negated_min, scratch, offset_search);
                min = -negated_min;
            } else {
                d = offset_block(xb, top, layout.bits == 4, levels, &min);
            }
            put_f16(fields, min);
            fields += 2;
        }
        put_f16(out, d);
        if (layout.bits == 5) put_q5_levels(levels, fields);
        else pack_nibbles32(levels, fields);
    }
}

void dequantize_row(Layout layout, const std::uint8_t* in, float* y, std::int64_t n) {
    const int half = 1 << (layout.bits - 1);
    std::uint8_t levels[qk];
    for (std::int64_t at = 0; at < n; at += qk, in += layout.block_bytes()) {
        const float d = get_f16(in);
        const std::uint8_t* fields = in + 2;
        if (layout.family == Family::offset) {
            const float m = get_f16(fields);
            fields += 2;
            if (layout.bits == 5) get_q5_levels(fields, levels);
            else unpack_nibbles32(fields, levels);
            for (int j = 0; j < qk; ++j) y[at + j] = static_cast<float>(levels[j]) * d + m;
        } else {
            if (layout.bits == 5) get_q5_levels(fields, levels);
            else unpack_nibbles32(fields, levels);
            for (int j = 0; j < qk; ++j) y[at + j] = static_cast<float>(levels[j] - half) * d;
        }
    }
}

constexpr Layout q4_0{Family::symmetric, 4}, q4_1{Family::offset, 4}, q5_0{Family::symmetric, 5},
    q5_1{Family::offset, 5};

constexpr int q8_block_bytes = 2 + qk;

// ---- The code grids (ggml_types.hpp): one group per block, value = level * d (+ m), the
// symmetric layouts' code being level - half.
template <Layout L>
void legacy_grid_read(const std::uint8_t* block, float* step, float* offset) noexcept {
    step[0] = get_f16(block);
    offset[0] = L.family == Family::offset ? get_f16(block + 2) : 0.0f;
}

template <Layout L>
void legacy_grid_write(const int* codes, std::uint8_t* block) noexcept {
    const int half = L.family == Family::symmetric ? 1 << (L.bits - 1) : 0;
    std::uint8_t levels[qk];
    for (int j = 0; j < qk; ++j) levels[j] = static_cast<std::uint8_t>(codes[j] + half);
    std::uint8_t* fields = block + (L.family == Family::offset ? 4 : 2);
    if (L.bits == 5) put_q5_levels(levels, fields);
    else pack_nibbles32(levels, fields);
}

template <Layout L>
constexpr CodeGrid legacy_grid() noexcept {
    const int levels = 1 << L.bits, low = L.family == Family::symmetric ? -levels / 2 : 0;
    return {qk, low, low + levels - 1, legacy_grid_read<L>, legacy_grid_write<L>};
}

void q8_0_grid_read(const std::uint8_t* block, float* step, float* offset) noexcept {
    step[0] = get_f16(block);
    offset[0] = 0.0f;
}

void q8_0_grid_write(const int* codes, std::uint8_t* block) noexcept {
    for (int j = 0; j < qk; ++j) block[2 + j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(codes[j]));
}

}  // namespace

const CodeGrid q4_0_grid = legacy_grid<q4_0>(), q4_1_grid = legacy_grid<q4_1>(), q5_0_grid = legacy_grid<q5_0>(),
                 q5_1_grid = legacy_grid<q5_1>();
// -127..127: ggml's own Q8_0 codes; -128, which its quantizer never writes, is left out.
const CodeGrid q8_0_grid{qk, -127, 127, q8_0_grid_read, q8_0_grid_write};

void quantize_row_q4_0(const float* x, std::uint8_t* out, std::int64_t n, const float* importance) {
    quantize_row(q4_0, x, out, n, importance);
}
void dequantize_row_q4_0(const std::uint8_t* in, float* y, std::int64_t n) { dequantize_row(q4_0, in, y, n); }

void quantize_row_q4_1(const float* x, std::uint8_t* out, std::int64_t n, const float* importance) {
    quantize_row(q4_1, x, out, n, importance);
}
void dequantize_row_q4_1(const std::uint8_t* in, float* y, std::int64_t n) { dequantize_row(q4_1, in, y, n); }

void quantize_row_q5_0(const float* x, std::uint8_t* out, std::int64_t n, const float* importance) {
    quantize_row(q5_0, x, out, n, importance);
}
void dequantize_row_q5_0(const std::uint8_t* in, float* y, std::int64_t n) { dequantize_row(q5_0, in, y, n); }

void quantize_row_q5_1(const float* x, std::uint8_t* out, std::int64_t n, const float* importance) {
    quantize_row(q5_1, x, out, n, importance);
}
void dequantize_row_q5_1(const std::uint8_t* in, float* y, std::int64_t n) { dequantize_row(q5_1, in, y, n); }

// Q8_0: scale = max|x| / 127, levels rounded half away from zero (roundf); no importance path.
void quantize_row_q8_0(const float* x, std::uint8_t* out, std::int64_t n, const float*) {
    if (const Q8Blocks lanes = active_q8_0_blocks()) {  // the same arithmetic in SIMD lanes (k_lanes.hpp)
        constexpr std::int64_t chunk = 64;
        float scales[chunk];
        for (std::int64_t at = 0; at < n; at += chunk * qk, x += chunk * qk, out += chunk * q8_block_bytes) {
            const std::int64_t blocks = std::min(chunk, (n - at) / qk);
            lanes(blocks, x, out, scales);
            for (std::int64_t b = 0; b < blocks; ++b) put_f16(out + b * q8_block_bytes, scales[b]);
        }
        return;
    }
    for (std::int64_t at = 0; at < n; at += qk, out += q8_block_bytes) {
        float amax = 0.0f;
        for (int j = 0; j < qk; ++j) amax = std::max(amax, std::fabs(x[at + j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        put_f16(out, d);
        for (int j = 0; j < qk; ++j)
            out[2 + j] = static_cast<std::uint8_t>(x86_truncate(std::roundf(x[at + j] * id)));
    }
}

void dequantize_row_q8_0(const std::uint8_t* in, float* y, std::int64_t n) {
    for (std::int64_t at = 0; at < n; at += qk, in += q8_block_bytes) {
        const float d = get_f16(in);
        for (int j = 0; j < qk; ++j) y[at + j] = static_cast<float>(static_cast<std::int8_t>(in[2 + j])) * d;
    }
}

}  // namespace moequant::ggml_quants
