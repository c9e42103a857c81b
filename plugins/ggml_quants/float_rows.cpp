// F16 and BF16 rows: element-wise conversions, matching ggml's ggml_fp32_to_fp16_row /
// ggml_fp16_to_fp32_row and ggml_fp32_to_bf16_row_ref (ggml_compute_fp32_to_bf16) / bf16 << 16.
// Neither type uses an importance matrix.
#include "block_bytes.hpp"
#include "quant_search.hpp"
#include "row_codecs.hpp"

#include <cstring>

namespace moequant::ggml_quants {

namespace {

// Round to nearest even on the upper 16 bits; a NaN keeps its upper bits with the quiet bit set
// (a NaN whose payload sits only in the low bits must not round into infinity).
std::uint16_t to_bf16(float value) noexcept {
    std::uint32_t bits;
    std::memcpy(&bits, &value, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 64);
    return static_cast<std::uint16_t>((bits + (0x7fffu + ((bits >> 16) & 1u))) >> 16);
}

}  // namespace

void quantize_row_f16(const float* x, std::uint8_t* out, std::int64_t n, const float*) {
    for (std::int64_t i = 0; i < n; ++i) put_u16(out + 2 * i, to_f16(x[i]));
}

void dequantize_row_f16(const std::uint8_t* in, float* y, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) y[i] = get_f16(in + 2 * i);
}

void quantize_row_bf16(const float* x, std::uint8_t* out, std::int64_t n, const float*) {
    for (std::int64_t i = 0; i < n; ++i) put_u16(out + 2 * i, to_bf16(x[i]));
}

void dequantize_row_bf16(const std::uint8_t* in, float* y, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
        const std::uint32_t bits = static_cast<std::uint32_t>(in[2 * i] | (in[2 * i + 1] << 8)) << 16;
        std::memcpy(y + i, &bits, 4);
    }
}

}  // namespace moequant::ggml_quants
