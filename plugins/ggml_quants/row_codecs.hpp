// The row codecs of each GGUF type (ggml_types.hpp's QuantizeRow / DequantizeRow), one family per
// source file: float_rows.cpp (F16, BF16), legacy_rows.cpp (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0),
// k_rows.cpp (Q2_K .. Q6_K), iq4_rows.cpp (IQ4_NL, IQ4_XS), mxfp4_rows.cpp (MXFP4).
#pragma once

#include <cstdint>

namespace moequant::ggml_quants {

#define MOEQUANT_GGML_ROW_CODEC(type)                                                                        \
    void quantize_row_##type(const float* x, std::uint8_t* out, std::int64_t n, const float* importance); \
    void dequantize_row_##type(const std::uint8_t* in, float* y, std::int64_t n);

MOEQUANT_GGML_ROW_CODEC(f16)
MOEQUANT_GGML_ROW_CODEC(bf16)
MOEQUANT_GGML_ROW_CODEC(q4_0)
MOEQUANT_GGML_ROW_CODEC(q4_1)
MOEQUANT_GGML_ROW_CODEC(q5_0)
MOEQUANT_GGML_ROW_CODEC(q5_1)
MOEQUANT_GGML_ROW_CODEC(q8_0)
MOEQUANT_GGML_ROW_CODEC(q2_k)
MOEQUANT_GGML_ROW_CODEC(q3_k)
MOEQUANT_GGML_ROW_CODEC(q4_k)
MOEQUANT_GGML_ROW_CODEC(q5_k)
MOEQUANT_GGML_ROW_CODEC(q6_k)
MOEQUANT_GGML_ROW_CODEC(iq4_nl)
MOEQUANT_GGML_ROW_CODEC(iq4_xs)
MOEQUANT_GGML_ROW_CODEC(mxfp4)

#undef MOEQUANT_GGML_ROW_CODEC

struct CodeGrid;
// The code grids (ggml_types.hpp's CodeGrid) of the types that have one.
extern const CodeGrid q4_0_grid, q4_1_grid, q5_0_grid, q5_1_grid, q8_0_grid, q2_k_grid, q3_k_grid, q4_k_grid, q5_k_grid,
    q6_k_grid, iq4_nl_grid, iq4_xs_grid;

// One row of n MXFP4 values as Hugging Face checkpoints store them (gpt-oss's `_blocks` /
// `_scales`, DeepSeek-V4's packed weight and scale: byte k of a row holds element 2k in its low
// nibble and 2k + 1 in its high one; one E8M0 byte per 32 elements) into ggml's MXFP4 blocks, the
// values unchanged: each block is the scale byte as stored, then byte j holding element j (low)
// and j + 16 (high). n a multiple of 32.
void relay_mxfp4_row(const std::uint8_t* codes, const std::uint8_t* scales, std::uint8_t* out, std::int64_t n) noexcept;

}  // namespace moequant::ggml_quants
