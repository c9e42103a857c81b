#include <moequant/engine/expert_parts.hpp>
#include <moequant/error.hpp>

#include <cstring>

namespace moequant {

Tensor join_expert_parts(const std::vector<Tensor>& pieces, Projection projection) {
    if (pieces.empty() || pieces.front().shape().size() != 2 || pieces.front().dtype() != DType::F32)
        throw Error(ErrorKind::internal, "join_expert_parts needs F32 2-D parts");
    const Shape shape = pieces.front().shape();
    for (const Tensor& piece : pieces)
        if (piece.shape() != shape || piece.dtype() != DType::F32)
            throw Error(ErrorKind::internal, "join_expert_parts was given parts of different shapes");
    if (pieces.size() == 1) return Tensor::copy_of(pieces.front().view());
    const auto n = static_cast<std::int64_t>(pieces.size());
    const bool by_columns = projection == Projection::down;
    const std::int64_t rows = by_columns ? shape[0] : shape[0] * n, cols = by_columns ? shape[1] * n : shape[1];
    Tensor full = Tensor::uninitialized(DType::F32, {rows, cols});
    float* out = full.data_as<float>();
    for (std::int64_t p = 0; p < n; ++p) {
        const float* in = pieces[static_cast<std::size_t>(p)].data_as<float>();
        if (!by_columns) {  // rows [p * rows/n, ...)
            std::memcpy(out + p * shape[0] * cols, in, pieces[static_cast<std::size_t>(p)].size_bytes());
            continue;
        }
        for (std::int64_t r = 0; r < rows; ++r)  // columns [p * cols/n, ...) of every row
            std::memcpy(out + r * cols + p * shape[1], in + r * shape[1], static_cast<std::size_t>(shape[1]) * sizeof(float));
    }
    return full;
}

}  // namespace moequant

namespace moequant {

std::span<const float> part_columns(std::span<const float> weights, Projection projection, int part, int parts) {
    if (projection != Projection::down || parts == 1) return weights;
    const std::size_t width = weights.size() / static_cast<std::size_t>(parts);
    return weights.subspan(width * static_cast<std::size_t>(part), width);
}

}  // namespace moequant
