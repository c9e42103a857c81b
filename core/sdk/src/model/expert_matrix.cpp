#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>

#include <cstring>
#include <vector>

namespace moequant {
namespace {

[[noreturn]] void mismatch(const ExpertWeightSource& s, const std::string& message) {
    throw Error(ErrorKind::input, message, {.tensor = s.tensor, .code = "ShapeMismatch"});
}

// A 2-D window of a (possibly 3-D) view as BF16 bits: rows [r0, r0+nr) x cols [c0, c0+nc) of
// matrix `matrix` (the index along dimension 0 of a 3-D tensor, or 0 for a 2-D one).
void copy_window_bf16(const TensorView& v, std::int64_t matrix, std::int64_t r0, std::int64_t nr, std::int64_t c0,
                      std::int64_t nc, std::uint16_t* out) {
    const std::int64_t rows = v.shape[v.shape.size() - 2], cols = v.shape.back();
    const std::size_t element = dtype_bits(v.dtype) / 8;
    std::vector<std::uint16_t> line(static_cast<std::size_t>(nc));
    for (std::int64_t r = 0; r < nr; ++r) {
        const std::size_t offset = static_cast<std::size_t>(((matrix * rows) + r0 + r) * cols + c0) * element;
        TensorView row{v.dtype, {nc}, v.bytes.subspan(offset, static_cast<std::size_t>(nc) * element)};
        if (v.dtype == DType::BF16) std::memcpy(out + r * nc, row.data(), static_cast<std::size_t>(nc) * 2);
        else decode_to_bf16(row, std::span<std::uint16_t>(out + r * nc, static_cast<std::size_t>(nc)));
    }
}

}  // namespace

Tensor load_expert_matrix(const Checkpoint& checkpoint, const ExpertWeightSource& s,
                          const std::optional<BlockSize>& fp8_block) {
    TensorView v = checkpoint.view(s.tensor);
    if (v.dtype != s.dtype)
        mismatch(s, "has dtype " + std::string(dtype_name(v.dtype)) + ", the plan says " + std::string(dtype_name(s.dtype)));
    if (v.dtype == DType::F8_E4M3) {
        if (s.slice) mismatch(s, "FP8 fused expert tensors are not supported");
        if (!fp8_block) mismatch(s, "is FP8 but no block size is known (quantization_config.weight_block_size)");
        return dequantize_fp8_block(v, checkpoint.view(s.scale_tensor), *fp8_block, {.tensor = s.tensor});
    }
    if (v.dtype != DType::BF16 && v.dtype != DType::F16 && v.dtype != DType::F32)
        mismatch(s, "has dtype " + std::string(dtype_name(v.dtype)) + "; experts must be BF16, F16, F32 or FP8");

    Tensor out = Tensor::uninitialized(DType::BF16, {s.rows, s.cols});
    auto* o = out.data_as<std::uint16_t>();
    if (!s.slice) {
        if (v.shape != Shape{s.rows, s.cols})
            mismatch(s, "has shape " + shape_to_string(v.shape) + ", the plan says " + shape_to_string({s.rows, s.cols}));
        copy_window_bf16(v, 0, 0, s.rows, 0, s.cols, o);
        return out;
    }
    const auto& sl = *s.slice;
    if (v.shape.size() != 3 || sl.expert >= v.shape[0]) mismatch(s, "is not a fused [E, a, b] tensor holding this expert");
    // The stored window: rows x cols of matrix `expert`, before any transposition.
    const std::int64_t stored_rows = sl.transposed ? s.cols : s.rows, stored_cols = sl.transposed ? s.rows : s.cols;
    const std::int64_t r0 = sl.along_columns ? 0 : sl.offset, c0 = sl.along_columns ? sl.offset : 0;
    if (r0 + stored_rows > v.shape[1] || c0 + stored_cols > v.shape[2])
        mismatch(s, "slice of " + shape_to_string(v.shape) + " runs past the tensor");
    if (!sl.transposed) {
        copy_window_bf16(v, sl.expert, r0, stored_rows, c0, stored_cols, o);
        return out;
    }
    std::vector<std::uint16_t> stored(static_cast<std::size_t>(stored_rows * stored_cols));
    copy_window_bf16(v, sl.expert, r0, stored_rows, c0, stored_cols, stored.data());
    for (std::int64_t r = 0; r < stored_rows; ++r)
        for (std::int64_t c = 0; c < stored_cols; ++c) o[c * stored_rows + r] = stored[static_cast<std::size_t>(r * stored_cols + c)];
    return out;
}

Tensor split_expert_part(const Tensor& matrix, Projection projection, int part, int parts) {
    if (matrix.dtype() != DType::BF16 || matrix.shape().size() != 2)
        throw Error(ErrorKind::internal, "split_expert_part needs a 2-D BF16 matrix");
    const std::int64_t rows = matrix.shape()[0], cols = matrix.shape()[1];
    const std::int64_t split = projection == Projection::down ? cols : rows;  // the expert size I
    if (parts <= 0 || split % parts != 0)
        throw Error(ErrorKind::input,
                    "the expert size " + std::to_string(split) + " is not divisible by " + std::to_string(parts) +
                        " threadpool parts",
                    {.code = "UnsplittableExpert",
                     .hint = "choose a --threadpool-count that divides the expert intermediate size"});
    const std::int64_t each = split / parts;
    if (parts == 1) return Tensor::copy_of(matrix.view());
    const auto* in = matrix.data_as<std::uint16_t>();
    if (projection != Projection::down) {
        Tensor out = Tensor::uninitialized(DType::BF16, {each, cols});
        std::memcpy(out.data(), in + part * each * cols, static_cast<std::size_t>(each * cols) * 2);
        return out;
    }
    Tensor out = Tensor::uninitialized(DType::BF16, {rows, each});
    for (std::int64_t r = 0; r < rows; ++r)
        std::memcpy(out.data_as<std::uint16_t>() + r * each, in + r * cols + part * each, static_cast<std::size_t>(each) * 2);
    return out;
}

std::uint64_t layer_input_bytes(const MoeLayerPlan& layer) {
    std::uint64_t bytes = 0;
    for (const auto& e : layer.experts)
        for (const auto& s : e.weights) bytes += static_cast<std::uint64_t>(s.rows * s.cols) * dtype_bits(s.dtype) / 8;
    return bytes;
}

void release_layer_pages(const Checkpoint& checkpoint, const MoeLayerPlan& layer) {
    for (const auto& e : layer.experts)
        for (const auto& s : e.weights) {
            checkpoint.release_pages(s.tensor);
            if (!s.scale_tensor.empty()) checkpoint.release_pages(s.scale_tensor);
        }
}

}  // namespace moequant
