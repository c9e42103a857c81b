#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>
#include <moequant/parallel.hpp>

#include <algorithm>

#include <cstring>
#include <vector>

namespace moequant {
namespace {

[[noreturn]] void mismatch(const ExpertWeightSource& s, const std::string& message) {
    throw Error(ErrorKind::input, message, {.tensor = s.tensor, .code = "ShapeMismatch"});
}

[[noreturn]] void bad_window(const EncodedWeight& w, const std::string& message) {
    throw Error(ErrorKind::internal, "decode window " + message + " of weight " + shape_to_string(w.shape),
                {.tensor = w.name});
}

void check_window(const EncodedWeight& w, const DecodeWindow& d) {
    if (w.shape.size() < 2) bad_window(w, "on a weight of rank " + std::to_string(w.shape.size()));
    const std::int64_t rows = w.shape[w.shape.size() - 2], cols = w.shape.back();
    const std::int64_t matrices = w.shape.size() == 3 ? w.shape[0] : 1;
    if (d.matrix < 0 || d.matrix >= matrices) bad_window(w, "matrix " + std::to_string(d.matrix));
    if (d.row_step < 1 || d.row_begin < 0 || d.row_begin > d.row_end || d.row_end > rows)
        bad_window(w, "rows [" + std::to_string(d.row_begin) + "," + std::to_string(d.row_end) + ") step " +
                          std::to_string(d.row_step));
    if (d.col_begin < 0 || d.col_begin > d.col_end || d.col_end > cols)
        bad_window(w, "columns [" + std::to_string(d.col_begin) + "," + std::to_string(d.col_end) + ")");
}

}  // namespace

std::size_t decode_target_bytes(DecodeTarget target) noexcept { return target == DecodeTarget::f32 ? 4 : 2; }

void decode_weight(const Checkpoint& checkpoint, const EncodedWeight& weight, const DecodeWindow& window,
                   DecodeTarget target, std::span<std::byte> out) {
    check_window(weight, window);
    if (!weight.decoder) throw Error(ErrorKind::internal, "weight has no decoder", {.tensor = weight.name});
    const auto rows = static_cast<std::size_t>(window.rows()), cols = static_cast<std::size_t>(window.cols());
    const std::size_t row_bytes = cols * decode_target_bytes(target);
    if (out.size() != rows * row_bytes)
        throw Error(ErrorKind::internal, "decode output of " + std::to_string(out.size()) + " bytes for a " +
                                             std::to_string(rows) + " x " + std::to_string(cols) + " window",
                    {.tensor = weight.name});
    if (rows == 0 || cols == 0) return;
    // About 256 Ki elements per task; every row is decoded on its own, so the split (and the
    // thread count) cannot change the result.
    const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 18) / cols);
    parallel_for(0, rows, grain, [&](std::size_t begin, std::size_t end) {
        DecodeWindow part = window;
        part.row_begin = window.row_begin + static_cast<std::int64_t>(begin) * window.row_step;
        part.row_end = std::min(window.row_end, window.row_begin + static_cast<std::int64_t>(end) * window.row_step);
        weight.decoder->decode(checkpoint, weight, part, target, out.subspan(begin * row_bytes, (end - begin) * row_bytes));
    });
}

Tensor decode_matrix(const Checkpoint& checkpoint, const EncodedWeight& weight, std::int64_t matrix, DecodeTarget target) {
    if (weight.shape.size() < 2) bad_window(weight, "on a weight of rank " + std::to_string(weight.shape.size()));
    const std::int64_t rows = weight.shape[weight.shape.size() - 2], cols = weight.shape.back();
    Tensor out = Tensor::uninitialized(target == DecodeTarget::f32 ? DType::F32 : DType::BF16, {rows, cols});
    decode_weight(checkpoint, weight, {.matrix = matrix, .row_end = rows, .col_end = cols}, target, out.bytes());
    return out;
}

Tensor load_expert_matrix(const Checkpoint& checkpoint, const ExpertWeightSource& s, DecodeTarget target) {
    const EncodedWeight& w = checkpoint.weight(s.tensor);
    const DType dtype = target == DecodeTarget::f32 ? DType::F32 : DType::BF16;
    if (!s.slice) {
        if (w.shape != Shape{s.rows, s.cols})
            mismatch(s, "has shape " + shape_to_string(w.shape) + ", the plan says " + shape_to_string({s.rows, s.cols}));
        return decode_matrix(checkpoint, w, 0, target);
    }
    const auto& sl = *s.slice;
    if (w.shape.size() != 3 || sl.expert < 0 || sl.expert >= w.shape[0])
        mismatch(s, "is not a fused [E, a, b] weight holding this expert");
    if (sl.step < 1 || (sl.along_columns && sl.step != 1)) mismatch(s, "has a fused slice step the decoder cannot serve");
    // The stored window: rows x cols of matrix `expert`, before any transposition.
    const std::int64_t stored_rows = sl.transposed ? s.cols : s.rows, stored_cols = sl.transposed ? s.rows : s.cols;
    DecodeWindow window{.matrix = sl.expert};
    window.row_begin = sl.along_columns ? 0 : sl.offset;
    window.row_step = sl.along_columns ? 1 : sl.step;
    window.row_end = window.row_begin + (stored_rows - 1) * window.row_step + 1;
    window.col_begin = sl.along_columns ? sl.offset : 0;
    window.col_end = window.col_begin + stored_cols;
    if (stored_rows <= 0 || stored_cols <= 0 || window.row_begin < 0 || window.col_begin < 0 ||
        window.row_end > w.shape[1] || window.col_end > w.shape[2])
        mismatch(s, "slice of " + shape_to_string(w.shape) + " runs past the weight");
    if (!sl.transposed) {
        Tensor out = Tensor::uninitialized(dtype, {s.rows, s.cols});
        decode_weight(checkpoint, w, window, target, out.bytes());
        return out;
    }
    Tensor stored = Tensor::uninitialized(dtype, {stored_rows, stored_cols});
    decode_weight(checkpoint, w, window, target, stored.bytes());
    Tensor out = Tensor::uninitialized(dtype, {s.rows, s.cols});
    const std::size_t size = decode_target_bytes(target);
    const std::byte* in = stored.data();
    std::byte* o = out.data();
    for (std::int64_t r = 0; r < stored_rows; ++r)
        for (std::int64_t c = 0; c < stored_cols; ++c)
            std::memcpy(o + static_cast<std::size_t>(c * stored_rows + r) * size,
                        in + static_cast<std::size_t>(r * stored_cols + c) * size, size);
    return out;
}

Tensor split_expert_part(const Tensor& matrix, Projection projection, int part, int parts) {
    if ((matrix.dtype() != DType::BF16 && matrix.dtype() != DType::F32) || matrix.shape().size() != 2)
        throw Error(ErrorKind::internal, "split_expert_part needs a 2-D BF16 or F32 matrix");
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
    const std::size_t size = dtype_bits(matrix.dtype()) / 8;
    const std::byte* in = matrix.data();
    if (projection != Projection::down) {
        Tensor out = Tensor::uninitialized(matrix.dtype(), {each, cols});
        std::memcpy(out.data(), in + static_cast<std::size_t>(part * each * cols) * size, static_cast<std::size_t>(each * cols) * size);
        return out;
    }
    Tensor out = Tensor::uninitialized(matrix.dtype(), {rows, each});
    for (std::int64_t r = 0; r < rows; ++r)
        std::memcpy(out.data() + static_cast<std::size_t>(r * each) * size, in + static_cast<std::size_t>(r * cols + part * each) * size,
                    static_cast<std::size_t>(each) * size);
    return out;
}

std::uint64_t layer_input_bytes(const Checkpoint& checkpoint, const MoeLayerPlan& layer) {
    std::uint64_t bytes = 0;
    for (const auto& e : layer.experts)
        for (const auto& s : e.weights) {
            const EncodedWeight& w = checkpoint.weight(s.tensor);
            const std::uint64_t elements = shape_elements(w.shape).value_or(0);
            const auto share = static_cast<std::uint64_t>(s.rows) * static_cast<std::uint64_t>(s.cols);
            if (elements > 0) bytes += static_cast<std::uint64_t>(static_cast<unsigned __int128>(w.stored_bytes) * share / elements);
        }
    return bytes;
}

void release_layer_pages(const Checkpoint& checkpoint, const MoeLayerPlan& layer) {
    for (const auto& e : layer.experts)
        for (const auto& s : e.weights)
            for (const auto& [role, tensor] : checkpoint.weight(s.tensor).tensors) checkpoint.release_pages(tensor);
}

}  // namespace moequant
