// The K-quant rows (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K): 256-value super-blocks with quantized
// sub-block scales. Byte for byte as ggml src/ggml-quants.c writes them: without an importance
// matrix as quantize_row_qN_K_ref (what ggml_quantize_chunk runs then), with one as
// quantize_row_qN_K_impl; decoding as dequantize_row_qN_K. Float operations keep ggml's order
// and precision (see quant_search.hpp); the block layouts are ggml-common.h's block_qN_K.
#include "block_bytes.hpp"  // fp16 fields; requantizing reads the rounded value back, as ggml does
#include "ggml_types.hpp"
#include "k_lanes.hpp"
#include "quant_search.hpp"
#include "row_codecs.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace moequant::ggml_quants {

namespace {

constexpr int super_block = 256;  // QK_K

int clamp(int v, int low, int high) noexcept { return std::max(low, std::min(high, v)); }

float sum_of_squares(const float* x, int n) noexcept {
    float s = 0;
    for (int i = 0; i < n; ++i) s += x[i] * x[i];
    return s;
}

float sum_of(const float* x, int n) noexcept {
    float s = 0;
    for (int i = 0; i < n; ++i) s += x[i];
    return s;
}

// The imatrix weights of the _impl quantizers: importance times sqrt(sigma2 + x^2), where
// sigma2 is a per-type multiple of the super-block's mean square.
void importance_weights(const float* importance, const float* x, float sigma2, int n, float* w) noexcept {
    for (int i = 0; i < n; ++i) w[i] = importance[i] * std::sqrt(sigma2 + x[i] * x[i]);
}

// The offset search of the imatrix paths (Q2_K, Q4_K, Q5_K).
constexpr OffsetSearch imatrix_offset_search{-0.9f, 0.05f, 36, false};

// ---- 2-bit planes (Q2_K, Q3_K): each 128 values fill 32 bytes, value 32k + l of the half in
// bits 2k of byte l.
void pack_2bit_planes(const std::uint8_t* levels, std::uint8_t* qs) noexcept {
    for (int half = 0; half < 2; ++half) {
        const std::uint8_t* L = levels + 128 * half;
        for (int l = 0; l < 32; ++l)
            qs[32 * half + l] =
                static_cast<std::uint8_t>(L[l] | (L[l + 32] << 2) | (L[l + 64] << 4) | (L[l + 96] << 6));
    }
}
int two_bits_at(const std::uint8_t* qs, int e) noexcept {
    return (qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3;
}

// ---- 6-bit scale and min of 8 sub-blocks in 12 bytes (Q4_K, Q5_K): sub-blocks 0-3 in the low
// 6 bits of bytes 0-3 (scale) and 4-7 (min); 4-7 as nibbles in bytes 8-11 with their top two
// bits in the spare high bits of bytes 0-7. Truncation to bytes as ggml's uint8_t stores do.
void pack_scale_min(const std::uint8_t* ls, const std::uint8_t* lm, std::uint8_t* s) noexcept {
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            s[j] = ls[j];
            s[j + 4] = lm[j];
        } else {
            s[j + 4] = static_cast<std::uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            s[j - 4] = static_cast<std::uint8_t>(s[j - 4] | ((ls[j] >> 4) << 6));
            s[j] = static_cast<std::uint8_t>(s[j] | ((lm[j] >> 4) << 6));
        }
    }
}
void scale_min_at(const std::uint8_t* s, int j, int& scale, int& min) noexcept {
    if (j < 4) {
        scale = s[j] & 63;
        min = s[j + 4] & 63;
    } else {
        scale = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

// ---- 6-bit scales of 16 sub-blocks in 12 bytes (Q3_K): low nibbles in bytes 0-7 (sub-blocks
// 8-15 in the high nibble), top two bits of sub-block j in byte 8 + j%4 at bit 2*(j/4).
void pack_q3_scales(const int* levels, std::uint8_t* s) noexcept {
    std::memset(s, 0, 12);
    for (int j = 0; j < 16; ++j) {
        const int l = levels[j];
        if (j < 8) s[j] = static_cast<std::uint8_t>(l & 0xF);
        else s[j - 8] = static_cast<std::uint8_t>(s[j - 8] | ((l & 0xF) << 4));
        s[8 + j % 4] = static_cast<std::uint8_t>(s[8 + j % 4] | ((l >> 4) << (2 * (j / 4))));
    }
}
// The signed scale of sub-block j (-32..31).
int q3_scale_at(const std::uint8_t* s, int j) noexcept {
    const int low = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    return static_cast<std::int8_t>(low | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}

// ---- Q2_K block: scales[16] qs[64] d dmin
constexpr int q2_scales = 0, q2_qs = 16, q2_d = 80, q2_dmin = 82, q2_bytes = 84;

// Requantizes with the stored (rounded) d, dmin and 4-bit scale/min, then packs. Sub-blocks with
// a zero scale keep the search's levels.
void q2_finish(const float* x, std::uint8_t* levels, std::uint8_t* block) noexcept {
    const float d_all = get_f16(block + q2_d), m_all = get_f16(block + q2_dmin);
    for (int j = 0; j < 16; ++j) {
        const float d = d_all * static_cast<float>(block[q2_scales + j] & 0xF);
        if (d == 0) continue;
        const float m = m_all * static_cast<float>(block[q2_scales + j] >> 4);
        for (int i = 16 * j; i < 16 * j + 16; ++i)
            levels[i] = static_cast<std::uint8_t>(clamp(nearest_int((x[i] + m) / d), 0, 3));
    }
    pack_2bit_planes(levels, block + q2_qs);
}

// ---- Q3_K block: hmask[32] qs[64] scales[12] d
constexpr int q3_hmask = 0, q3_qs = 32, q3_scales = 96, q3_d = 108, q3_bytes = 110;

// Levels 0..7: bit 2 of value e into hmask (byte e%32, bit e/32), the low two bits packed.
void pack_q3_levels(const std::int8_t* levels, std::uint8_t* block) noexcept {
    std::uint8_t low[super_block];
    std::uint8_t* hmask = block + q3_hmask;
    std::memset(hmask, 0, 32);
    for (int e = 0; e < super_block; ++e) {
        int l = levels[e];
        if (l > 3) {
            hmask[e % 32] = static_cast<std::uint8_t>(hmask[e % 32] | (1 << (e / 32)));
            l -= 4;
        }
        low[e] = static_cast<std::uint8_t>(l);
    }
    pack_2bit_planes(low, block + q3_qs);
}

// Requantizes (levels 0..7) with the stored d and scales, then splits off bit 2 into hmask
// (value e at byte e%32, bit e/32) and packs the low two bits.
void q3_finish(const float* x, std::int8_t* levels, std::uint8_t* block) noexcept {
    const float d_all = get_f16(block + q3_d);
    for (int j = 0; j < 16; ++j) {
        const float d = d_all * static_cast<float>(q3_scale_at(block + q3_scales, j));
        if (d == 0) continue;
        for (int i = 16 * j; i < 16 * j + 16; ++i)
            levels[i] = static_cast<std::int8_t>(clamp(nearest_int(x[i] / d), -4, 3) + 4);
    }
    pack_q3_levels(levels, block);
}

// ---- Q4_K / Q5_K: d dmin scales[12], then the levels. Both run the same scale/min search and
// differ in the level width, the plain search's steps and how the levels are packed.
constexpr int k4_d = 0, k4_dmin = 2, k4_scales = 4;
struct ScaleMinType {
    int nmax;
    OffsetSearch plain;
    bool clamp_imatrix_levels;  // ggml's Q5_K clamps the imatrix path's 6-bit levels, Q4_K does not
};

// The sub-block searches of `blocks` consecutive super-blocks: for sub-block k, scales[k],
// mins[k] (negated), with an importance matrix the sum of its weights sw[k], and its levels
// at levels[32 k]. Runs the SIMD lanes (k_lanes.hpp) where the CPU has them: the same
// bits as the scalar search.
void scale_min_search(const float* x, const float* importance, const ScaleMinType& type, int blocks, float* scales,
                      float* mins, float* sw, std::uint8_t* levels) noexcept {
    constexpr int max_blocks = 8;  // callers pass at most this many
    float w[max_blocks * super_block];
    std::uint8_t scratch[32];
    const OffsetLanes lanes = active_offset_lanes();
    for (int b = 0; b < blocks; ++b) {
        const float* xb = x + b * super_block;
        if (!importance) {
            if (lanes) continue;
            // Weights av|x| + |x| per sub-block.
            for (int j = 0; j < 8; ++j) {
                const float* xs = xb + 32 * j;
                const float av_x = std::sqrt(sum_of_squares(xs, 32) / 32);
                for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xs[l]);
                const int k = 8 * b + j;
                scales[k] = offset_levels_qkx2(32, type.nmax, xs, w, levels + 32 * k, &mins[k], scratch, type.plain);
            }
        } else {
            const float sigma2 = 2 * sum_of_squares(xb, super_block) / super_block;
            for (int j = 0; j < 8; ++j) {
                const int k = 8 * b + j;
                float* wk = w + 32 * k;
                importance_weights(importance + b * super_block + 32 * j, xb + 32 * j, sigma2, 32, wk);
                sw[k] = sum_of(wk, 32);
                if (!lanes)
                    scales[k] = offset_levels_qkx3(32, type.nmax, xb + 32 * j, wk, levels + 32 * k, &mins[k], scratch,
                                                   imatrix_offset_search);
            }
        }
    }
    if (lanes) {
        if (importance) lanes(8 * blocks, type.nmax, x, w, true, imatrix_offset_search, levels, scales, mins);
        else lanes(8 * blocks, type.nmax, x, nullptr, false, type.plain, levels, scales, mins);
    }
}

// Writes d, dmin and the packed 6-bit scales/mins of one super-block into `head` from its
// sub-block searches and the requantized levels 0..nmax of the 256 values into `levels`.
void scale_min_finish(const float* x, bool with_importance, const ScaleMinType& type, const float* scales,
                      const float* mins, const float* sw, std::uint8_t* head, std::uint8_t* levels) noexcept {
    std::uint8_t ls[8], lm[8];
    float d, dmin;
    if (!with_importance) {
        // The largest scale and min map to level 63.
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 8; ++j) {
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
        const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
        for (int j = 0; j < 8; ++j) {
            // ggml stores the rounded int into a byte before clamping.
            ls[j] = std::min<std::uint8_t>(63, static_cast<std::uint8_t>(nearest_int(inv_scale * scales[j])));
            lm[j] = std::min<std::uint8_t>(63, static_cast<std::uint8_t>(nearest_int(inv_min * mins[j])));
        }
        d = max_scale / 63.f;
        dmin = max_min / 63.f;
    } else {
        d = positive_levels(8, 63, scales, ls, sw);
        dmin = positive_levels(8, 63, mins, lm, sw);
        if (type.clamp_imatrix_levels)
            for (int j = 0; j < 8; ++j) {
                ls[j] = std::min<std::uint8_t>(63, ls[j]);
                lm[j] = std::min<std::uint8_t>(63, lm[j]);
            }
    }
    pack_scale_min(ls, lm, head + k4_scales);
    put_f16(head + k4_d, d);
    put_f16(head + k4_dmin, dmin);

    const float d_all = get_f16(head + k4_d), m_all = get_f16(head + k4_dmin);
    float ds[8], dm[8];
    for (int j = 0; j < 8; ++j) {
        int sc, m;
        scale_min_at(head + k4_scales, j, sc, m);
        ds[j] = d_all * static_cast<float>(sc);
        dm[j] = m_all * static_cast<float>(m);
    }
    if (const OffsetRequantize lanes = active_offset_requantize()) return lanes(x, ds, dm, type.nmax, levels);
    for (int j = 0; j < 8; ++j) {
        if (ds[j] == 0) continue;
        for (int i = 32 * j; i < 32 * j + 32; ++i)
            levels[i] = static_cast<std::uint8_t>(clamp(nearest_int((x[i] + dm[j]) / ds[j]), 0, type.nmax));
    }
}

// Quantizes the super-blocks of a row of n values, a few at a time, calling
// pack(block index, levels, block bytes) after each one's head is written.
template <class Pack>
void scale_min_row(const float* x, std::uint8_t* out, std::int64_t n, const float* importance, const ScaleMinType& type,
                   int block_bytes, Pack pack) noexcept {
    constexpr int chunk = 8;
    float scales[8 * chunk], mins[8 * chunk], sw[8 * chunk];
    std::uint8_t levels[super_block * chunk];
    const std::int64_t nb = n / super_block;
    for (std::int64_t first = 0; first < nb; first += chunk) {
        const int blocks = static_cast<int>(std::min<std::int64_t>(chunk, nb - first));
        const float* xc = x + first * super_block;
        const float* ic = importance ? importance + first * super_block : nullptr;
        scale_min_search(xc, ic, type, blocks, scales, mins, sw, levels);
        for (int b = 0; b < blocks; ++b) {
            std::uint8_t* block = out + (first + b) * block_bytes;
            std::uint8_t* lb = levels + b * super_block;
            scale_min_finish(xc + b * super_block, ic != nullptr, type, scales + 8 * b, mins + 8 * b, sw + 8 * b, block, lb);
            pack(lb, block);
        }
    }
}

// d * scale * level - dmin * min for value e of a Q4_K/Q5_K block, level given.
struct ScaleMinDecoder {
    float d[8], m[8];
    explicit ScaleMinDecoder(const std::uint8_t* head) noexcept {
        const float d_all = get_f16(head + k4_d), m_all = get_f16(head + k4_dmin);
        for (int j = 0; j < 8; ++j) {
            int sc, mn;
            scale_min_at(head + k4_scales, j, sc, mn);
            d[j] = d_all * static_cast<float>(sc);
            m[j] = m_all * static_cast<float>(mn);
        }
    }
    float operator()(int e, int level) const noexcept { return d[e / 32] * static_cast<float>(level) - m[e / 32]; }
};

// Value e of a 64-value chunk pair layout (Q4_K/Q5_K low nibbles): byte 32*(e/64) + e%32,
// the high nibble for the second 32 of each 64.
int nibble_at(const std::uint8_t* qs, int e) noexcept {
    return (qs[32 * (e / 64) + e % 32] >> (4 * ((e / 32) % 2))) & 0xF;
}

void pack_nibble_pairs(const std::uint8_t* levels, std::uint8_t* qs) noexcept {
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l)
            qs[32 * c + l] =
                static_cast<std::uint8_t>((levels[64 * c + l] & 0xF) | ((levels[64 * c + l + 32] & 0xF) << 4));
}

constexpr int q4_qs = 16, q4_bytes = 144;
constexpr ScaleMinType q4_type{15, {-1.f, 0.1f, 20, false}, false};
constexpr int q5_qh = 16, q5_qs = 48, q5_bytes = 176;
constexpr ScaleMinType q5_type{31, {-0.5f, 0.1f, 15, false}, true};

// Bit 4 of value e (levels are 0..31) goes to qh byte e%32, bit e/32; the low nibbles pack as
// Q4_K's. Written byte by byte, without branches, so the loop vectorizes.
void pack_q5_k_levels(const std::uint8_t* levels, std::uint8_t* block) noexcept {
    std::uint8_t* qh = block + q5_qh;
    for (int l = 0; l < 32; ++l) {
        unsigned bits = 0;
        for (int k = 0; k < 8; ++k) bits |= static_cast<unsigned>(levels[32 * k + l] >> 4) << k;
        qh[l] = static_cast<std::uint8_t>(bits);
    }
    pack_nibble_pairs(levels, block + q5_qs);
}

// ---- Q6_K block: ql[128] qh[64] scales[16] d
constexpr int q6_ql = 0, q6_qh = 128, q6_scales = 192, q6_d = 208, q6_bytes = 210;

// Value e = 128h + 32k + l (levels 0..63): low nibble in ql[64h + 32(k%2) + l] at bit 4(k/2),
// top two bits in qh[32h + l] at bit 2k. Each byte written once so this vectorizes.
void pack_q6_levels(const std::int8_t* levels, std::uint8_t* out) noexcept {
    std::uint8_t* ql = out + q6_ql;
    std::uint8_t* qh = out + q6_qh;
    for (int h = 0; h < 2; ++h)
        for (int l = 0; l < 32; ++l) {
            const std::int8_t* v = levels + 128 * h + l;  // v[32k] is value k of this l
            ql[64 * h + l] = static_cast<std::uint8_t>((v[0] & 0xF) | ((v[64] & 0xF) << 4));
            ql[64 * h + 32 + l] = static_cast<std::uint8_t>((v[32] & 0xF) | ((v[96] & 0xF) << 4));
            qh[32 * h + l] =
                static_cast<std::uint8_t>((v[0] >> 4) | ((v[32] >> 4) << 2) | ((v[64] >> 4) << 4) | ((v[96] >> 4) << 6));
        }
}

// Writes one Q6_K super-block from its sub-block searches: the 8-bit scales, d, the levels
// requantized with the stored scales (vector lanes where the CPU has them) and packed.
void q6_finish(const float* x, const float* scales, std::int8_t* levels, std::uint8_t* out,
               SymmetricRequantize requantize_lanes) noexcept {
    float max_scale = 0, max_abs_scale = 0;
    for (int j = 0; j < 16; ++j) {
        if (std::fabs(scales[j]) > max_abs_scale) {
            max_abs_scale = std::fabs(scales[j]);
            max_scale = scales[j];
        }
    }
    if (max_abs_scale < group_max_eps) {
        std::memset(out, 0, q6_bytes);
        put_f16(out + q6_d, 0.f);
        return;
    }
    // The scale of largest magnitude maps to -128; the 8-bit scales are clamped above only.
    const float inverse = -128.f / max_scale;
    put_f16(out + q6_d, 1 / inverse);
    for (int j = 0; j < 16; ++j)
        out[q6_scales + j] = static_cast<std::uint8_t>(std::min(127, nearest_int(inverse * scales[j])));
    const float d_all = get_f16(out + q6_d);
    float ds[16];
    for (int j = 0; j < 16; ++j) ds[j] = d_all * static_cast<float>(static_cast<std::int8_t>(out[q6_scales + j]));
    if (requantize_lanes) {
        requantize_lanes(x, ds, 32, levels);
    } else {
        for (int j = 0; j < 16; ++j) {
            if (ds[j] == 0) continue;
            for (int i = 16 * j; i < 16 * j + 16; ++i)
                levels[i] = static_cast<std::int8_t>(clamp(nearest_int(x[i] / ds[j]), -32, 31) + 32);
        }
    }
    pack_q6_levels(levels, out);
}

// ---- The code grids (ggml_types.hpp). Q4_K / Q5_K: 8 groups of 32, d * sc * level - dmin * m
// as d_j * level + (-m_j); Q6_K: 16 groups of 16, (d * scale) * (level - 32), the code level - 32.
void scale_min_grid_read(const std::uint8_t* block, float* step, float* offset) noexcept {
    const ScaleMinDecoder decode(block);
    for (int j = 0; j < 8; ++j) {
        step[j] = decode.d[j];
        offset[j] = -decode.m[j];
    }
}

template <void (*Pack)(const std::uint8_t*, std::uint8_t*)>
void scale_min_grid_write(const int* codes, std::uint8_t* block) noexcept {
    std::uint8_t levels[super_block];
    for (int e = 0; e < super_block; ++e) levels[e] = static_cast<std::uint8_t>(codes[e]);
    Pack(levels, block);
}

void pack_q4_k_levels(const std::uint8_t* levels, std::uint8_t* block) noexcept { pack_nibble_pairs(levels, block + q4_qs); }

void q6_grid_read(const std::uint8_t* block, float* step, float* offset) noexcept {
    const float d_all = get_f16(block + q6_d);
    for (int j = 0; j < 16; ++j) {
        step[j] = d_all * static_cast<float>(static_cast<std::int8_t>(block[q6_scales + j]));
        offset[j] = 0.0f;
    }
}

void q6_grid_write(const int* codes, std::uint8_t* block) noexcept {
    std::int8_t levels[super_block];
    for (int e = 0; e < super_block; ++e) levels[e] = static_cast<std::int8_t>(codes[e] + 32);
    pack_q6_levels(levels, block);
}

// Q2_K: 16 groups of 16, d * (sc & 15) * level - dmin * (sc >> 4); Q3_K: 16 groups of 16,
// (d * scale) * (level - 4) with the 6-bit signed scale, the code level - 4.
void q2_grid_read(const std::uint8_t* block, float* step, float* offset) noexcept {
    const float d_all = get_f16(block + q2_d), m_all = get_f16(block + q2_dmin);
    for (int j = 0; j < 16; ++j) {
        step[j] = d_all * static_cast<float>(block[q2_scales + j] & 0xF);
        offset[j] = -(m_all * static_cast<float>(block[q2_scales + j] >> 4));
    }
}

void q2_grid_write(const int* codes, std::uint8_t* block) noexcept {
    std::uint8_t levels[super_block];
    for (int e = 0; e < super_block; ++e) levels[e] = static_cast<std::uint8_t>(codes[e]);
    pack_2bit_planes(levels, block + q2_qs);
}

void q3_grid_read(const std::uint8_t* block, float* step, float* offset) noexcept {
    const float d_all = get_f16(block + q3_d);
    for (int j = 0; j < 16; ++j) {
        step[j] = d_all * static_cast<float>(q3_scale_at(block + q3_scales, j));
        offset[j] = 0.0f;
    }
}

void q3_grid_write(const int* codes, std::uint8_t* block) noexcept {
    std::int8_t levels[super_block];
    for (int e = 0; e < super_block; ++e) levels[e] = static_cast<std::int8_t>(codes[e] + 4);
    pack_q3_levels(levels, block);
}

}  // namespace

const CodeGrid q2_k_grid{16, 0, 3, q2_grid_read, q2_grid_write};
const CodeGrid q3_k_grid{16, -4, 3, q3_grid_read, q3_grid_write};
const CodeGrid q4_k_grid{32, 0, 15, scale_min_grid_read, scale_min_grid_write<pack_q4_k_levels>};
const CodeGrid q5_k_grid{32, 0, 31, scale_min_grid_read, scale_min_grid_write<pack_q5_k_levels>};
const CodeGrid q6_k_grid{16, -32, 31, q6_grid_read, q6_grid_write};

void quantize_row_q2_k(const float* x, std::uint8_t* out, std::int64_t n, const float* importance) {
    for (std::int64_t b = 0; b < n / super_block; ++b, x += super_block, out += q2_bytes) {
        const float* qw = importance ? importance + b * super_block : nullptr;
        std::uint8_t levels[super_block], scratch[16];
        float scales[16], mins[16], w[16];
        if (!qw) {
            // Mean-absolute-error search weighted by |x|; largest scale and min map to level 15.
            constexpr OffsetSearch search{-0.5f, 0.1f, 15, true};
            float max_scale = 0, max_min = 0;
            for (int j = 0; j < 16; ++j) {
                for (int l = 0; l < 16; ++l) w[l] = std::fabs(x[16 * j + l]);
                scales[j] = offset_levels_qkx2(16, 3, x + 16 * j, w, levels + 16 * j, &mins[j], scratch, search);
                if (scales[j] > max_scale) max_scale = scales[j];
                if (mins[j] > max_min) max_min = mins[j];
            }
            std::uint8_t* s = out + q2_scales;
            if (max_scale > 0) {
                const float inverse = 15.f / max_scale;
                for (int j = 0; j < 16; ++j) s[j] = static_cast<std::uint8_t>(nearest_int(inverse * scales[j]));
                put_f16(out + q2_d, max_scale / 15.f);
            } else {
                std::memset(s, 0, 16);
                put_f16(out + q2_d, 0.f);
            }
            if (max_min > 0) {
                const float inverse = 15.f / max_min;
                for (int j = 0; j < 16; ++j)
                    s[j] = static_cast<std::uint8_t>(s[j] | (nearest_int(inverse * mins[j]) << 4));
                put_f16(out + q2_dmin, max_min / 15.f);
            } else {
                put_f16(out + q2_dmin, 0.f);
            }
        } else {
            const float sigma2 = sum_of_squares(x, super_block) / super_block;
            float sw[16];
            for (int j = 0; j < 16; ++j) {
                importance_weights(qw + 16 * j, x + 16 * j, sigma2, 16, w);
                sw[j] = sum_of(w, 16);
                scales[j] = offset_levels_qkx3(16, 3, x + 16 * j, w, levels + 16 * j, &mins[j], scratch,
                                               imatrix_offset_search);
            }
            std::uint8_t ls[16], lm[16];
            put_f16(out + q2_d, positive_levels(16, 15, scales, ls, sw));
            put_f16(out + q2_dmin, positive_levels(16, 15, mins, lm, sw));
            for (int j = 0; j < 16; ++j) out[q2_scales + j] = static_cast<std::uint8_t>(ls[j] | (lm[j] << 4));
        }
        q2_finish(x, levels, out);
    }
}

void dequantize_row_q2_k(const std::uint8_t* in, float* y, std::int64_t n) {
    for (std::int64_t b = 0; b < n / super_block; ++b, in += q2_bytes, y += super_block) {
        const float d_all = get_f16(in + q2_d), m_all = get_f16(in + q2_dmin);
        for (int e = 0; e < super_block; ++e) {
            const int sc = in[q2_scales + e / 16];
            const float d = d_all * static_cast<float>(sc & 0xF), m = m_all * static_cast<float>(sc >> 4);
            y[e] = d * static_cast<float>(two_bits_at(in + q2_qs, e)) - m;
        }
    }
}

void quantize_row_q3_k(const float* x, std::uint8_t* out, std::int64_t n, const float* importance) {
    for (std::int64_t b = 0; b < n / super_block; ++b, x += super_block, out += q3_bytes) {
        const float* qw = importance ? importance + b * super_block : nullptr;
        std::int8_t levels[super_block];
        float scales[16];
        int ls[16];
        if (!qw) {
            // Sub-block scales refined level by level; the one of largest magnitude maps to -32.
            float max_scale = 0, amax = 0;
            for (int j = 0; j < 16; ++j) {
                scales[j] = symmetric_levels_refined(16, 4, x + 16 * j, levels + 16 * j);
                if (std::fabs(scales[j]) > amax) {
                    amax = std::fabs(scales[j]);
                    max_scale = scales[j];
                }
            }
            if (max_scale != 0) {
                const float inverse = -32.f / max_scale;
                for (int j = 0; j < 16; ++j) {
                    // ggml rounds into an int8 before clamping.
                    const int l = static_cast<std::int8_t>(nearest_int(inverse * scales[j]));
                    ls[j] = static_cast<std::int8_t>(clamp(l, -32, 31) + 32);
                }
                pack_q3_scales(ls, out + q3_scales);
                put_f16(out + q3_d, 1 / inverse);
            } else {
                std::memset(out + q3_scales, 0, 12);
                put_f16(out + q3_d, 0.f);
            }
        } else {
            const float sigma2 = 2 * sum_of_squares(x, super_block) / super_block;
            float w[16], sw[16];
            for (int j = 0; j < 16; ++j) {
                importance_weights(qw + 16 * j, x + 16 * j, sigma2, 16, w);
                sw[j] = sum_of(w, 16);
                scales[j] = symmetric_levels(16, 4, x + 16 * j, levels + 16 * j, w);
            }
            std::int8_t scale_levels[16];
            const float d = symmetric_levels(16, 32, scales, scale_levels, sw);
            for (int j = 0; j < 16; ++j) ls[j] = scale_levels[j];
            pack_q3_scales(ls, out + q3_scales);
            put_f16(out + q3_d, d);
        }
        q3_finish(x, levels, out);
    }
}

void dequantize_row_q3_k(const std::uint8_t* in, float* y, std::int64_t n) {
    for (std::int64_t b = 0; b < n / super_block; ++b, in += q3_bytes, y += super_block) {
        const float d_all = get_f16(in + q3_d);
        for (int e = 0; e < super_block; ++e) {
            const float d = d_all * static_cast<float>(q3_scale_at(in + q3_scales, e / 16));
            const bool high = (in[q3_hmask + e % 32] >> (e / 32)) & 1;
            y[e] = d * static_cast<float>(two_bits_at(in + q3_qs, e) - (high ? 0 : 4));
        }
    }
}

void quantize_row_q4_k(const float* x, std::uint8_t* out, std::int64_t n, const float* importance) {
    scale_min_row(x, out, n, importance, q4_type, q4_bytes, pack_q4_k_levels);
}

void dequantize_row_q4_k(const std::uint8_t* in, float* y, std::int64_t n) {
    for (std::int64_t b = 0; b < n / super_block; ++b, in += q4_bytes, y += super_block) {
        const ScaleMinDecoder decode(in);
        for (int e = 0; e < super_block; ++e) y[e] = decode(e, nibble_at(in + q4_qs, e));
    }
}

void quantize_row_q5_k(const float* x, std::uint8_t* out, std::int64_t n, const float* importance) {
    scale_min_row(x, out, n, importance, q5_type, q5_bytes, pack_q5_k_levels);
}

void dequantize_row_q5_k(const std::uint8_t* in, float* y, std::int64_t n) {
    for (std::int64_t b = 0; b < n / super_block; ++b, in += q5_bytes, y += super_block) {
        const ScaleMinDecoder decode(in);
        for (int e = 0; e < super_block; ++e) {
            const int high = (in[q5_qh + e % 32] >> (e / 32)) & 1;
            y[e] = decode(e, nibble_at(in + q5_qs, e) + 16 * high);
        }
    }
}

void quantize_row_q6_k(const float* x, std::uint8_t* out, std::int64_t n, const float* importance) {
    // The sub-block searches of a few super-blocks at a time (whole groups of SIMD lanes), then
    // each super-block's scales, requantizing and packing.
    constexpr int chunk = 8;
    std::int8_t levels[super_block * chunk];
    float scales[16 * chunk];
    const SymmetricLanes lanes = active_symmetric_lanes();
    const SymmetricRequantize requantize_lanes = active_symmetric_requantize();
    const std::int64_t nb = n / super_block;
    for (std::int64_t first = 0; first < nb; first += chunk) {
        const int blocks = static_cast<int>(std::min<std::int64_t>(chunk, nb - first));
        const float* xc = x + first * super_block;
        // The imatrix path weighs the sub-block search by the raw importance (no sigma2 term).
        const float* ic = importance ? importance + first * super_block : nullptr;
        if (lanes) lanes(16 * blocks, 32, xc, ic, levels, scales);
        else
            for (int j = 0; j < 16 * blocks; ++j)
                scales[j] = symmetric_levels(16, 32, xc + 16 * j, levels + 16 * j, ic ? ic + 16 * j : nullptr);
        for (int b = 0; b < blocks; ++b)
            q6_finish(xc + b * super_block, scales + 16 * b, levels + super_block * b, out + (first + b) * q6_bytes,
                      requantize_lanes);
    }
}

void dequantize_row_q6_k(const std::uint8_t* in, float* y, std::int64_t n) {
    for (std::int64_t b = 0; b < n / super_block; ++b, in += q6_bytes, y += super_block) {
        const float d_all = get_f16(in + q6_d);
        for (int e = 0; e < super_block; ++e) {
            const int h = e / 128, k = (e / 32) % 4, l = e % 32;
            const int low = (in[q6_ql + 64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0xF;
            const int top = (in[q6_qh + 32 * h + l] >> (2 * k)) & 3;
            const float scale = static_cast<float>(static_cast<std::int8_t>(in[q6_scales + e / 16]));
            y[e] = d_all * scale * static_cast<float>((low | (top << 4)) - 32);
        }
    }
}

}  // namespace moequant::ggml_quants
