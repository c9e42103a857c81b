#include <moequant/compute_dtype.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/engine/hessian.hpp>
#include <moequant/error.hpp>
#include <moequant/parallel.hpp>

#include <Eigen/Core>

#include <algorithm>
#include <bit>
#include <cmath>
#include <type_traits>

namespace moequant {

namespace {

using ColMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr std::int64_t tile = 512;          // H is updated in tile x tile blocks, one task each
constexpr std::int64_t chunk_tokens = 2048; // BF16 inputs are widened this many tokens at a time

}  // namespace

HessianAccumulator::HessianAccumulator(std::int64_t columns)
    : columns_(columns), lower_(static_cast<std::size_t>(columns * columns), 0.0f) {
    if (columns <= 0) throw Error(ErrorKind::internal, "a Hessian needs at least one column");
}

namespace {

// The lower-triangle tiles (i >= j) of a k x k matrix: H is symmetric.
std::vector<std::pair<std::int64_t, std::int64_t>> lower_tiles(std::int64_t k) {
    const std::int64_t tiles = (k + tile - 1) / tile;
    std::vector<std::pair<std::int64_t, std::int64_t>> work;
    for (std::int64_t i = 0; i < tiles; ++i)
        for (std::int64_t j = 0; j <= i; ++j) work.emplace_back(i, j);
    return work;
}

// The BF16 bits of `tokens` rows of `k` inputs, column by column ([k, tokens]): BF16 views as
// they are, BF16-exact floats by their upper half.
template <class Value>
std::vector<std::uint16_t> bf16_columns(const Value* inputs, std::int64_t tokens, std::int64_t k) {
    std::vector<std::uint16_t> columns(static_cast<std::size_t>(k * tokens));
    parallel_for(0, static_cast<std::size_t>(k), 64, [&](std::size_t first, std::size_t last) {
        for (std::int64_t t = 0; t < tokens; ++t)  // each token's row read once, contiguously
            for (std::size_t c = first; c < last; ++c) {
                if constexpr (std::is_same_v<Value, float>)
                    columns[c * tokens + t] = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(inputs[t * k + c]) >> 16);
                else
                    columns[c * tokens + t] = inputs[t * k + c];
            }
    });
    return columns;
}

}  // namespace

bool bf16_exact(const float* values, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i)
        if ((std::bit_cast<std::uint32_t>(values[i]) & 0xFFFFu) != 0) return false;
    return true;
}

// H += 2 X^T X from X's columns as BF16 rows ([k, tokens], bf16_columns), tile by tile.
void HessianAccumulator::add_bf16_columns(const std::vector<std::uint16_t>& columns, std::int64_t tokens) {
    const std::int64_t k = columns_;
    const auto work = lower_tiles(k);
    parallel_for(0, work.size(), 1, [&](std::size_t first, std::size_t last) {
        std::vector<float> block;
        for (std::size_t w = first; w < last; ++w) {
            const auto [i, j] = work[w];
            const std::int64_t r0 = i * tile, c0 = j * tile;
            const std::int64_t rn = std::min(tile, k - r0), cn = std::min(tile, k - c0);
            // The tile transposed, [cn, rn]: its rows are H's columns, contiguous in lower_.
            block.resize(static_cast<std::size_t>(rn * cn));
            bf16_product(columns.data() + c0 * tokens, columns.data() + r0 * tokens, true, block.data(), cn, rn, tokens);
            for (std::int64_t c = 0; c < cn; ++c) {
                float* column = lower_.data() + (c0 + c) * k + r0;
                const float* from = block.data() + c * rn;
                for (std::int64_t r = 0; r < rn; ++r) column[r] += 2.0f * from[r];
            }
        }
    });
}

void HessianAccumulator::add(const float* inputs, std::int64_t tokens) {
    if (tokens <= 0) return;
    const std::int64_t k = columns_;
    if (compute_dtype() == ComputeDtype::bf16 && bf16_exact(inputs, static_cast<std::size_t>(tokens * k))) {
        add_bf16_columns(bf16_columns(inputs, tokens, k), tokens);
        return;
    }
    // A = fl32(sqrt 2) * x, rounded per element as the reference does, then H += A^T A.
    const float root2 = std::sqrt(2.0f);
    RowMajor a = Eigen::Map<const RowMajor>(inputs, tokens, k) * root2;
    Eigen::Map<ColMajor> h(lower_.data(), k, k);
    const auto work = lower_tiles(k);
    parallel_for(0, work.size(), 1, [&](std::size_t first, std::size_t last) {
        for (std::size_t w = first; w < last; ++w) {
            const auto [i, j] = work[w];
            const std::int64_t r0 = i * tile, c0 = j * tile;
            const std::int64_t rn = std::min(tile, k - r0), cn = std::min(tile, k - c0);
            h.block(r0, c0, rn, cn).noalias() += a.middleCols(r0, rn).transpose() * a.middleCols(c0, cn);
        }
    });
}

void HessianAccumulator::add(const TensorView& inputs) {
    if (inputs.shape.size() != 2 || inputs.shape[1] != columns_)
        throw Error(ErrorKind::input, "calibration inputs are " + shape_to_string(inputs.shape) + ", expected [tokens, " +
                                          std::to_string(columns_) + "]");
    const std::int64_t tokens = inputs.shape[0];
    if (inputs.dtype == DType::F32) {  // in chunks too: add() scales a copy of what it is given
        const auto* values = reinterpret_cast<const float*>(inputs.data());
        for (std::int64_t t0 = 0; t0 < tokens; t0 += chunk_tokens) add(values + t0 * columns_, std::min(chunk_tokens, tokens - t0));
        return;
    }
    if (inputs.dtype != DType::BF16)
        throw Error(ErrorKind::input, "calibration inputs must be BF16 or F32, not " + std::string(dtype_name(inputs.dtype)));
    std::vector<float> chunk;
    const auto* bits = reinterpret_cast<const std::uint16_t*>(inputs.data());
    for (std::int64_t t0 = 0; t0 < tokens; t0 += chunk_tokens) {
        const std::int64_t n = std::min(chunk_tokens, tokens - t0);
        if (compute_dtype() == ComputeDtype::bf16) {  // BF16 is exact: its bits, not widened and narrowed again
            add_bf16_columns(bf16_columns(bits + t0 * columns_, n, columns_), n);
            continue;
        }
        chunk.resize(static_cast<std::size_t>(n * columns_));
        convert_bf16_to_f32(bits + t0 * columns_, chunk.data(), chunk.size());
        add(chunk.data(), n);
    }
}

Tensor HessianAccumulator::finish(std::int64_t samples) const {
    if (samples <= 0) throw Error(ErrorKind::input, "the Hessian needs at least one calibration sample");
    const std::int64_t k = columns_;
    Tensor out = Tensor::uninitialized(DType::F32, {k, k});  // every element is written below
    float* h = out.data_as<float>();
    const float n = static_cast<float>(samples);
    // Mirrored in 64 x 64 blocks, so that both the row-wise and the column-wise writes stay in
    // cache (element by element over the whole matrix, the column-wise ones missed every time).
    constexpr std::int64_t block = 64;
    const std::int64_t blocks = (k + block - 1) / block;
    parallel_for(0, static_cast<std::size_t>(blocks), 1, [&](std::size_t first, std::size_t last) {
        for (std::size_t jb = first; jb < last; ++jb)
            for (std::int64_t i0 = static_cast<std::int64_t>(jb) * block; i0 < k; i0 += block) {
                const std::int64_t j0 = static_cast<std::int64_t>(jb) * block;
                for (std::int64_t j = j0; j < std::min(j0 + block, k); ++j)
                    for (std::int64_t i = std::max(i0, j); i < std::min(i0 + block, k); ++i)
                        h[i * k + j] = h[j * k + i] = lower_[j * k + i] / n;
            }
    });
    return out;
}

double output_error(const Tensor& hessian, const float* w_a, const float* w_b, std::int64_t rows) {
    const std::int64_t k = hessian.shape()[0];
    RowMajor d = Eigen::Map<const RowMajor>(w_a, rows, k) - Eigen::Map<const RowMajor>(w_b, rows, k);
    Eigen::Map<const RowMajor> h(hessian.data_as<float>(), k, k);
    RowMajor dh = d * h;
    return static_cast<double>(dh.cwiseProduct(d).cast<double>().sum());
}

Tensor hessian_block(const Tensor& hessian, std::int64_t first, std::int64_t count) {
    const std::int64_t k = hessian.shape()[0];
    if (first < 0 || count <= 0 || first + count > k)
        throw Error(ErrorKind::internal, "columns [" + std::to_string(first) + ", " + std::to_string(first + count) +
                                             ") lie outside a Hessian of " + std::to_string(k));
    Eigen::Map<const RowMajor> h(hessian.data_as<float>(), k, k);
    Tensor block(DType::F32, {count, count});
    Eigen::Map<RowMajor>(block.data_as<float>(), count, count) = h.block(first, first, count, count);
    return block;
}

}  // namespace moequant
