#include "kt_arithmetic.hpp"

#include "amx_layout.hpp"
#include "aocl_int8_layout.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace moequant::test::kt {

namespace {

// fl32(1/127): kt writes amax / 127 and -ffast-math turns the division into this product.
const float one_over_127 = std::bit_cast<float>(0x3C010204u);

// _mm512_cvtps_epi32 (round to nearest even) then _mm512_cvtsepi32_epi8 (signed saturation).
std::int8_t saturated_code(float t) noexcept {
    const float r = std::nearbyint(t);
    // NaN and values beyond int32 convert to the "integer indefinite" INT32_MIN, which saturates low.
    if (!(std::fabs(r) < 2147483648.0f) || r <= -128.0f) return -128;
    return static_cast<std::int8_t>(std::min(r, 127.0f));
}

float bf16_round(float v) noexcept { return bf16_to_f32(f32_to_bf16(v)); }

const Tensor& part(const QuantizedTensor& q, const char* name) {
    const Tensor* t = q.part(name);
    if (!t) throw std::invalid_argument(std::string("no '") + name + "' part");
    return *t;
}

}  // namespace

std::int32_t signed_byte_product(std::int8_t activation, std::int8_t weight) noexcept {
    // _mm256_sign_epi8(weight, activation): negate where the activation is negative (in 8 bits),
    // zero where it is zero.
    std::int8_t signed_weight = weight;
    if (activation < 0) signed_weight = static_cast<std::int8_t>(-static_cast<std::uint8_t>(weight));
    if (activation == 0) signed_weight = 0;
    // _mm512_abs_epi8(activation), read as unsigned by dpbusd: |-128| stays 0x80 = 128.
    const auto magnitude = static_cast<std::uint8_t>(activation < 0 ? -activation : activation);
    return static_cast<std::int32_t>(magnitude) * signed_weight;
}

QuantizedActivations quantize_activations(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t group) {
    QuantizedActivations q;
    q.rows = rows;
    q.cols = cols;
    q.group = group;
    const std::int64_t groups = cols / group;
    q.codes.resize(static_cast<std::size_t>(rows * cols));
    q.scales.resize(static_cast<std::size_t>(rows * groups));
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t g = 0; g < groups; ++g) {
            const float* v = x + r * cols + g * group;
            float amax = 0;
            for (std::int64_t c = 0; c < group; ++c) amax = std::max(amax, std::fabs(v[c]));
            const float d = amax * one_over_127;
            const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
            q.scales[r * groups + g] = d;
            for (std::int64_t c = 0; c < group; ++c) q.codes[r * cols + g * group + c] = saturated_code(v[c] * inverse);
        }
    return q;
}

KernelWeights amx_weights(const QuantizedTensor& stored, bool int4, std::int64_t rows, std::int64_t cols) {
    const amx::Method method = int4 ? amx::Method::int4 : amx::Method::int8;
    const Tensor& codes = part(stored, "weight");
    const Tensor& scale = part(stored, "scale");
    if (codes.size_bytes() != static_cast<std::size_t>(amx::code_bytes(method, rows, cols)) ||
        scale.size_bytes() != static_cast<std::size_t>(4 * rows))
        throw std::invalid_argument("AMX parts do not fit the shape");
    KernelWeights w;
    w.rows = rows;
    w.cols = cols;
    w.group = cols;
    w.bytes.resize(static_cast<std::size_t>(rows * cols));
    w.scales.assign(scale.data_as<float>(), scale.data_as<float>() + rows);
    const auto* c = codes.data_as<std::uint8_t>();
    const std::int64_t tile_k = amx::constants(method).tile_k;
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t t = 0; t < cols / tile_k; ++t)
            for (std::int64_t g = 0; g < 16; ++g) {
                const std::uint8_t* word = c + amx::tile_word_offset(method, rows, cols, r, t, g);
                for (std::int64_t b = 0; b < 4; ++b) {
                    const std::int64_t j = g * 4 + b;
                    std::int8_t* row = w.bytes.data() + r * cols + t * tile_k;
                    if (!int4) {
                        row[j] = static_cast<std::int8_t>(word[b]);
                    } else {  // low nibble: column j, shifted up by 4; high nibble: column j + 64, masked
                        row[j] = static_cast<std::int8_t>(static_cast<std::uint8_t>(word[b] << 4));
                        row[j + 64] = static_cast<std::int8_t>(word[b] & 0xF0);
                    }
                }
            }
    return w;
}

KernelWeights rawint4_weights(const QuantizedTensor& stored, std::int64_t rows, std::int64_t cols) {
    const Tensor& packed = part(stored, "weight_packed");
    const Tensor& scale = part(stored, "weight_scale");
    constexpr std::int64_t group = 32;  // the amx backend's only group (docs/kt-arithmetic.md)
    if (packed.size_bytes() != static_cast<std::size_t>(rows * cols / 2) || scale.dtype() != DType::BF16 ||
        scale.elements() != static_cast<std::size_t>(rows * cols / group))
        throw std::invalid_argument("W4A16 group-32 parts do not fit the shape");
    KernelWeights w;
    w.rows = rows;
    w.cols = cols;
    w.group = group;
    w.rawint4 = true;
    w.bytes.resize(static_cast<std::size_t>(rows * cols));
    w.scales.resize(scale.elements());
    convert_bf16_to_f32(scale.data_as<std::uint16_t>(), w.scales.data(), scale.elements());
    // Bytes are read little-endian: column 2i in the low nibble of byte i, 2i + 1 in the high one.
    const auto* bytes = packed.data_as<std::uint8_t>();
    for (std::int64_t i = 0; i < rows * cols / 2; ++i) {
        const std::uint8_t b = bytes[i] ^ 0x88;
        w.bytes[2 * i] = static_cast<std::int8_t>(static_cast<std::uint8_t>(b << 4));
        w.bytes[2 * i + 1] = static_cast<std::int8_t>(b & 0xF0);
    }
    return w;
}

std::vector<float> kernel_product(const QuantizedActivations& a, const KernelWeights& w) {
    if (a.cols != w.cols || (w.rawint4 && a.group != w.group)) throw std::invalid_argument("activations do not fit the weights");
    std::vector<float> y(static_cast<std::size_t>(a.rows * w.rows));
    const std::int64_t groups = w.cols / w.group;
    for (std::int64_t m = 0; m < a.rows; ++m)
        for (std::int64_t n = 0; n < w.rows; ++n) {
            const std::int8_t* x = a.codes.data() + m * a.cols;
            const std::int8_t* b = w.bytes.data() + n * w.cols;
            if (!w.rawint4) {  // one int32 sum over the row, scaled once (apply_scale)
                std::int32_t sum = 0;
                for (std::int64_t c = 0; c < w.cols; ++c) sum += signed_byte_product(x[c], b[c]);
                y[m * w.rows + n] = (a.scales[m] * w.scales[n]) * static_cast<float>(sum);
                continue;
            }
            float total = 0;  // per 32-column group: its own int32 sum and scale, then / 16
            for (std::int64_t g = 0; g < groups; ++g) {
                std::int32_t sum = 0;
                for (std::int64_t c = g * w.group; c < (g + 1) * w.group; ++c) sum += signed_byte_product(x[c], b[c]);
                total += (a.scales[m * groups + g] * w.scales[n * groups + g]) * static_cast<float>(sum);
            }
            y[m * w.rows + n] = total / 16;
        }
    return y;
}

std::vector<float> kt_linear(const std::vector<float>& x, std::int64_t rows, const KernelWeights& w) {
    return kernel_product(quantize_activations(x.data(), rows, w.cols, w.rawint4 ? w.group : w.cols), w);
}

std::vector<float> avxvnni_linear(const std::vector<float>& x, std::int64_t rows, const KernelWeights& w) {
    if (!w.rawint4) throw std::invalid_argument("the avxvnni backend runs RAWINT4 weights");
    const std::int64_t groups = w.cols / w.group;
    std::vector<float> y(static_cast<std::size_t>(rows * w.rows), 0.0f);
    for (std::int64_t m = 0; m < rows; ++m)
        for (std::int64_t g = 0; g < groups; ++g) {
            const float* v = x.data() + m * w.cols + g * w.group;
            float amax = 0;
            for (std::int64_t c = 0; c < w.group; ++c) amax = std::max(amax, std::fabs(v[c]));
            if (amax <= std::numeric_limits<float>::min()) continue;  // an all-zero group adds nothing
            const float scale = amax * one_over_127, inverse = 1.0f / scale;
            std::vector<std::uint8_t> biased(static_cast<std::size_t>(w.group));
            for (std::int64_t c = 0; c < w.group; ++c)
                biased[c] = static_cast<std::uint8_t>(std::clamp(static_cast<int>(std::lrint(v[c] * inverse)), -127, 127) + 128);
            for (std::int64_t n = 0; n < w.rows; ++n) {
                const std::int8_t* b = w.bytes.data() + n * w.cols + g * w.group;
                std::int32_t dot = 0, weight_sum = 0;
                for (std::int64_t c = 0; c < w.group; ++c) {
                    const int q = b[c] / 16;  // the signed nibble -8..7
                    dot += biased[c] * q;
                    weight_sum += q;
                }
                y[m * w.rows + n] += static_cast<float>(dot - 128 * weight_sum) * scale * w.scales[n * groups + g];
            }
        }
    return y;
}

std::vector<float> moe_forward(const std::vector<float>& x, std::int64_t tokens, std::int64_t hidden, const Routing& routing,
                               const std::function<const KernelExpert&(std::int64_t)>& expert, Linear linear) {
    std::vector<float> y(static_cast<std::size_t>(tokens * hidden), 0.0f);
    for (std::int64_t t = 0; t < tokens; ++t) {
        const std::vector<float> token(x.begin() + t * hidden, x.begin() + (t + 1) * hidden);
        std::vector<float> sum(static_cast<std::size_t>(hidden), 0.0f);
        for (std::int64_t k = 0; k < routing.top_k; ++k) {
            const KernelExpert& e = expert(routing.experts[t * routing.top_k + k]);
            const float weight = routing.weights[t * routing.top_k + k];
            for (std::size_t p = 0; p < e.down.size(); ++p) {
                std::vector<float> gate = linear(token, 1, e.gate[p]);
                const std::vector<float> up = linear(token, 1, e.up[p]);
                for (std::size_t i = 0; i < gate.size(); ++i) {
                    const float g = bf16_round(gate[i]), u = bf16_round(up[i]);
                    gate[i] = bf16_round(g / (1.0f + std::exp(-g)) * u);
                }
                const std::vector<float> down = linear(gate, 1, e.down[p]);
                for (std::int64_t h = 0; h < hidden; ++h) sum[h] += weight * bf16_round(down[h]);
            }
        }
        for (std::int64_t h = 0; h < hidden; ++h) y[t * hidden + h] = bf16_round(sum[h]);
    }
    return y;
}

QuantizedActivations moe_int8_activations(const float* x, std::int64_t rows, std::int64_t cols) {
    QuantizedActivations q;
    q.rows = rows;
    q.cols = q.group = cols;
    q.codes.resize(static_cast<std::size_t>(rows * cols));
    q.scales.resize(static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r) {
        float amax = 0;
        for (std::int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(x[r * cols + c]));
        const float d = amax * one_over_127;
        q.scales[r] = d;
        for (std::int64_t c = 0; c < cols; ++c)
            q.codes[r * cols + c] = d == 0 ? 0 : static_cast<std::int8_t>(std::round(x[r * cols + c] / d));
    }
    return q;
}

AoclWeights aocl_weights(const QuantizedTensor& stored, std::int64_t rows, std::int64_t cols, std::int64_t block_rows) {
    const Tensor& codes = part(stored, "weight");
    const Tensor& scales = part(stored, "scale");
    if (rows % block_rows != 0 || codes.size_bytes() != static_cast<std::size_t>(rows / block_rows * moe_int::aocl_block_bytes(block_rows, cols)) ||
        scales.size_bytes() != static_cast<std::size_t>(4 * rows))
        throw std::invalid_argument("not a MOE_INT8 part of this shape");
    AoclWeights w{rows, cols, block_rows, {}, {}};
    w.blocks.assign(codes.data_as<std::uint8_t>(), codes.data_as<std::uint8_t>() + codes.size_bytes());
    w.scales.assign(scales.data_as<float>(), scales.data_as<float>() + rows);
    return w;
}

std::vector<std::int32_t> aocl_integer_product(const QuantizedActivations& a, const AoclWeights& w) {
    if (a.cols != w.cols) throw std::invalid_argument("activation and weight widths differ");
    const std::int64_t nb = w.block_rows, padded = (w.cols + 3) / 4 * 4, block = moe_int::aocl_block_bytes(nb, w.cols);
    std::vector<std::int32_t> out(static_cast<std::size_t>(a.rows * w.rows));
    for (std::int64_t t = 0; t < a.rows; ++t)
        for (std::int64_t r = 0; r < w.rows; ++r) {
            const std::uint8_t* b = w.blocks.data() + (r / nb) * block;
            std::uint32_t acc = 0;  // int32 arithmetic, wrapping as the register does
            for (std::int64_t c = 0; c < padded; ++c) {
                // Past k: whatever AOCL fills the activations with meets a zero weight code.
                const std::int8_t x = c < a.cols ? a.codes[t * a.cols + c] : 0;
                const auto unsigned_x = static_cast<std::uint8_t>(x + 128);
                const auto weight = static_cast<std::int8_t>(b[moe_int::aocl_code_offset(nb, r % nb, c)]);
                acc += static_cast<std::uint32_t>(static_cast<std::int32_t>(unsigned_x) * weight);
            }
            std::int32_t colsum;
            std::memcpy(&colsum, b + moe_int::aocl_colsum_offset(nb, w.cols, r % nb), 4);
            out[t * w.rows + r] = static_cast<std::int32_t>(acc - static_cast<std::uint32_t>(colsum));
        }
    return out;
}

}  // namespace moequant::test::kt
