// FP8 block dequantization (DeepSeek-V3 style `weight_scale_inv`), model-families.md §4.3–4.4.
//
// For an FP8 weight W of shape [M, N] and a scale tensor S of shape
// [ceil(M/block.rows), ceil(N/block.cols)], element (i, j) becomes
//     bf16_rne( f32(W[i][j]) * f32(S[i / block.rows][j / block.cols]) )
// with one float32 multiply (round to nearest even) — the arithmetic of the reference
// `weight_dequant` kernel followed by its cast to BF16. Edge blocks are partial; nothing
// outside [M, N] is read. The block size comes from the config
// (quantization_config.weight_block_size), never from the shapes.
#pragma once

#include <moequant/error.hpp>
#include <moequant/export.hpp>
#include <moequant/tensor.hpp>

#include <cstdint>
#include <span>

namespace moequant {

struct BlockSize {
    std::int64_t rows = 128;  // block height (output-feature direction)
    std::int64_t cols = 128;  // block width (input-feature direction)
};

// Checks dtypes and shapes: weight F8_E4M3 or F8_E5M2 with rank 2; scale F32, BF16 or
// F8_E8M0 with rank 2 and exactly the shape above; block sizes > 0. Throws Error(input)
// naming the tensors in `context` (context.tensor should name the weight).
MOEQUANT_API void check_fp8_block_inputs(const TensorView& weight, const TensorView& scale_inv,
                                         BlockSize block, const ErrorContext& context = {});

// Dequantizes rows [row_begin, row_end) of the weight into out_bf16, which holds exactly
// (row_end - row_begin) * N values. Single-threaded. Runs check_fp8_block_inputs (without
// context) first; a row range outside [0, M] or a wrong out_bf16 size is Error(internal).
// NaN weight bytes or scales give NaN outputs (quiet, sign kept); refusing them is the caller's
// choice.
MOEQUANT_API void dequantize_fp8_block_rows(const TensorView& weight, const TensorView& scale_inv,
                                            BlockSize block, std::int64_t row_begin,
                                            std::int64_t row_end, std::span<std::uint16_t> out_bf16);

// Checks the inputs and dequantizes the whole weight into a new BF16 tensor, in parallel
// (the result does not depend on the number of threads).
MOEQUANT_API Tensor dequantize_fp8_block(const TensorView& weight, const TensorView& scale_inv,
                                         BlockSize block, const ErrorContext& context = {});

}  // namespace moequant
