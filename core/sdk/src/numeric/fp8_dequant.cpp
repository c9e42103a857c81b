#include <moequant/cpu_isa.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/fp8_dequant.hpp>
#include <moequant/parallel.hpp>

#include "kernels/kernels.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace moequant {
namespace {

std::int64_t block_count(std::int64_t extent, std::int64_t block) noexcept {
    return extent / block + (extent % block != 0 ? 1 : 0);  // ceil without overflow
}

std::string block_text(BlockSize block) {
    return shape_to_string({block.rows, block.cols});
}

// Dtype, rank and byte count of one input; `role` is how messages name it.
void check_view(const TensorView& view, std::string_view role, bool dtype_ok, std::string_view allowed,
                const ErrorContext& context) {
    const std::string name(role);
    if (!dtype_ok)
        throw_input_error(name + " has dtype " + std::string(dtype_name(view.dtype)) + " but must be " +
                              std::string(allowed), context);
    if (view.shape.size() != 2)
        throw_input_error(name + " has shape " + shape_to_string(view.shape) +
                              " but FP8 block dequantization needs rank 2", context);
    const auto elements = shape_elements(view.shape);
    if (!elements) throw_input_error(name + " has an invalid shape " + shape_to_string(view.shape), context);
    const auto bytes = dtype_byte_size(view.dtype, *elements);
    if (!bytes || *bytes != view.bytes.size())
        throw_input_error(name + " holds " + std::to_string(view.bytes.size()) + " bytes but " +
                              std::string(dtype_name(view.dtype)) + " " + shape_to_string(view.shape) +
                              " needs " + (bytes ? std::to_string(*bytes) : std::string("more")),
                          context);
}

// One row of output from one row of FP8 bytes and the block scales spread over the columns.
using RowKernel = void (*)(const std::byte* src, const float* column_scale, std::uint16_t* dst,
                           std::size_t n) noexcept;

template <float (*decode)(std::uint8_t) noexcept>
void scalar_row(const std::byte* src, const float* column_scale, std::uint16_t* dst, std::size_t n) noexcept {
    for (std::size_t j = 0; j < n; ++j) {
        const float product = decode(static_cast<std::uint8_t>(src[j])) * column_scale[j];
        dst[j] = f32_to_bf16(product);
    }
}

RowKernel row_kernel(DType weight_dtype) noexcept {
    const bool e4m3 = weight_dtype == DType::F8_E4M3;
    switch (active_isa()) {
        case Isa::avx512:
            return e4m3 ? kernels::avx512::f8_e4m3_scaled_to_bf16 : kernels::avx512::f8_e5m2_scaled_to_bf16;
        case Isa::avx2:
            return e4m3 ? kernels::avx2::f8_e4m3_scaled_to_bf16 : kernels::avx2::f8_e5m2_scaled_to_bf16;
        case Isa::scalar: break;
    }
    return e4m3 ? scalar_row<f8_e4m3_to_f32> : scalar_row<f8_e5m2_to_f32>;
}

float scale_value(const TensorView& scale, std::size_t index) noexcept {
    const std::byte* base = scale.data();
    switch (scale.dtype) {
        case DType::BF16: {
            std::uint16_t bits;
            std::memcpy(&bits, base + 2 * index, 2);
            return bf16_to_f32(bits);
        }
        case DType::F8_E8M0: return f8_e8m0_to_f32(static_cast<std::uint8_t>(base[index]));
        default: {  // F32
            float value;
            std::memcpy(&value, base + 4 * index, 4);
            return value;
        }
    }
}

// Rows [row_begin, row_end) of checked inputs into out (row-major, N values per row).
void dequantize_checked_rows(const TensorView& weight, const TensorView& scale_inv, BlockSize block,
                             std::int64_t row_begin, std::int64_t row_end, std::uint16_t* out) {
    const auto columns = static_cast<std::size_t>(weight.shape[1]);
    const auto scale_columns = static_cast<std::size_t>(scale_inv.shape[1]);
    const auto block_cols = static_cast<std::size_t>(block.cols);
    const RowKernel kernel = row_kernel(weight.dtype);
    // The scales of one block row, repeated over the columns of each block: the row kernels
    // then need no block arithmetic, whatever the block width.
    std::vector<float> column_scale(columns);
    std::int64_t spread_block_row = -1;
    for (std::int64_t row = row_begin; row < row_end; ++row) {
        const std::int64_t block_row = row / block.rows;
        if (block_row != spread_block_row) {
            for (std::size_t b = 0; b < scale_columns; ++b) {
                const std::size_t first = b * block_cols;
                const std::size_t count = std::min(block_cols, columns - first);
                const float s = scale_value(scale_inv, static_cast<std::size_t>(block_row) * scale_columns + b);
                std::fill_n(column_scale.begin() + static_cast<std::ptrdiff_t>(first), count, s);
            }
            spread_block_row = block_row;
        }
        kernel(weight.data() + static_cast<std::size_t>(row) * columns, column_scale.data(),
               out + static_cast<std::size_t>(row - row_begin) * columns, columns);
    }
}

}  // namespace

void check_fp8_block_inputs(const TensorView& weight, const TensorView& scale_inv, BlockSize block,
                            const ErrorContext& context) {
    if (block.rows <= 0 || block.cols <= 0)
        throw_input_error("FP8 block size " + block_text(block) + " must be positive in both dimensions",
                          context);
    check_view(weight, "weight", weight.dtype == DType::F8_E4M3 || weight.dtype == DType::F8_E5M2,
               "F8_E4M3 or F8_E5M2", context);
    check_view(scale_inv, "weight_scale_inv",
               scale_inv.dtype == DType::F32 || scale_inv.dtype == DType::BF16 || scale_inv.dtype == DType::F8_E8M0,
               "F32, BF16 or F8_E8M0", context);
    const Shape expected{block_count(weight.shape[0], block.rows), block_count(weight.shape[1], block.cols)};
    if (scale_inv.shape != expected)
        throw_input_error("weight_scale_inv has shape " + shape_to_string(scale_inv.shape) + " but weight " +
                              shape_to_string(weight.shape) + " with block " + block_text(block) + " needs " +
                              shape_to_string(expected),
                          context);
}

void dequantize_fp8_block_rows(const TensorView& weight, const TensorView& scale_inv, BlockSize block,
                               std::int64_t row_begin, std::int64_t row_end, std::span<std::uint16_t> out_bf16) {
    check_fp8_block_inputs(weight, scale_inv, block);
    const std::int64_t rows = weight.shape[0];
    const auto columns = static_cast<std::uint64_t>(weight.shape[1]);
    if (row_begin < 0 || row_begin > row_end || row_end > rows)
        throw Error(ErrorKind::internal, "FP8 dequantization rows [" + std::to_string(row_begin) + "," +
                                             std::to_string(row_end) + ") are outside the weight's " +
                                             std::to_string(rows) + " rows");
    const std::uint64_t needed = static_cast<std::uint64_t>(row_end - row_begin) * columns;
    if (out_bf16.size() != needed)
        throw Error(ErrorKind::internal, "FP8 dequantization of " + std::to_string(row_end - row_begin) +
                                             " rows of " + std::to_string(columns) + " needs " +
                                             std::to_string(needed) + " output values, got " +
                                             std::to_string(out_bf16.size()));
    dequantize_checked_rows(weight, scale_inv, block, row_begin, row_end, out_bf16.data());
}

Tensor dequantize_fp8_block(const TensorView& weight, const TensorView& scale_inv, BlockSize block,
                            const ErrorContext& context) {
    check_fp8_block_inputs(weight, scale_inv, block, context);
    Tensor out(DType::BF16, weight.shape);
    const auto columns = static_cast<std::size_t>(weight.shape[1]);
    if (out.elements() == 0) return out;
    // About 256 Ki elements per task; every element is computed on its own, so the split
    // (and the thread count) cannot change the result.
    const std::size_t grain_rows = std::max<std::size_t>(1, (std::size_t{1} << 18) / columns);
    auto* result = out.data_as<std::uint16_t>();
    parallel_for(0, static_cast<std::size_t>(weight.shape[0]), grain_rows, [&](std::size_t begin, std::size_t end) {
        dequantize_checked_rows(weight, scale_inv, block, static_cast<std::int64_t>(begin),
                                static_cast<std::int64_t>(end), result + begin * columns);
    });
    return out;
}

}  // namespace moequant
