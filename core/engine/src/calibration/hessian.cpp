#include <moequant/compute_dtype.hpp>
#include <moequant/engine/hessian.hpp>
#include <moequant/error.hpp>
#include <moequant/matrix_products.hpp>
#include <moequant/parallel.hpp>

#include <Eigen/Core>

#include <algorithm>
#include <bit>
#include <cmath>
#include <type_traits>

namespace moequant {

namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// H is updated in tile x tile blocks, one product each (512: near oneDNN's single-thread peak
// for both dtypes, and 7% of the products' work wasted on the diagonal tiles' lower halves).
constexpr std::int64_t tile = 512;
constexpr std::int64_t chunk_tokens = 2048;  // inputs are scaled or narrowed this many tokens at a time
const float root2 = std::sqrt(2.0f);          // the reference scales the inputs by fl32(sqrt 2)

// The upper-triangle tiles (row block <= column block) of a k x k matrix: H is symmetric.
std::vector<std::pair<std::int64_t, std::int64_t>> upper_tiles(std::int64_t k) {
    const std::int64_t tiles = (k + tile - 1) / tile;
    std::vector<std::pair<std::int64_t, std::int64_t>> work;
    for (std::int64_t i = 0; i < tiles; ++i)
        for (std::int64_t j = i; j < tiles; ++j) work.emplace_back(i, j);
    return work;
}

// Every upper tile of sums (k x k, row-major) gets add(row0, rows, column0, columns, tile), in
// parallel: what each tile's product adds is op(X[:, rows])^T X[:, columns].
template <class AddTile>
void for_each_upper_tile(std::int64_t k, float* sums, const AddTile& add) {
    const auto work = upper_tiles(k);
    parallel_for(0, work.size(), 1, [&](std::size_t first, std::size_t last) {
        for (std::size_t w = first; w < last; ++w) {
            const std::int64_t r0 = work[w].first * tile, c0 = work[w].second * tile;
            add(r0, std::min(tile, k - r0), c0, std::min(tile, k - c0), sums + r0 * k + c0);
        }
    });
}

}  // namespace

// The sums start unwritten: the first product of each tile overwrites it (so the pages are
// first touched by the tiles' products, in parallel), finish() writes the lower triangle.
HessianAccumulator::HessianAccumulator(std::int64_t columns) : columns_(columns) {
    if (columns <= 0) throw Error(ErrorKind::internal, "a Hessian needs at least one column");
    sums_ = Tensor::uninitialized(DType::F32, {columns, columns});
}

// A working buffer of at least `tokens` rows, kept for the accumulator's later chunks; a Tensor
// so that its pages are populated at once (tensor.cpp), not faulted in one at a time.
Tensor& HessianAccumulator::working_buffer(Tensor& buffer, DType dtype, std::int64_t tokens) {
    if (buffer.data() == nullptr || buffer.elements() < static_cast<std::uint64_t>(tokens * columns_))
        buffer = Tensor::uninitialized(dtype, {std::min(chunk_tokens, std::max<std::int64_t>(tokens, 1)), columns_});
    return buffer;
}

bool bf16_exact(const float* values, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i)
        if ((std::bit_cast<std::uint32_t>(values[i]) & 0xFFFFu) != 0) return false;
    return true;
}

// H += 2 X^T X for `tokens` rows of BF16 inputs (exact products, FP32 sums).
void HessianAccumulator::add_bf16_rows(const std::uint16_t* rows, std::int64_t tokens) {
    const std::int64_t k = columns_;
    const float beta = added_ ? 1.0f : 0.0f;
    for_each_upper_tile(k, sums_.data_as<float>(), [&](std::int64_t r0, std::int64_t rn, std::int64_t c0, std::int64_t cn, float* c) {
        bf16_gemm(true, false, rn, cn, tokens, 2.0f, rows + r0, k, rows + c0, k, beta, c, k);
    });
    added_ = true;
}

void HessianAccumulator::add(const float* inputs, std::int64_t tokens) {
    if (tokens <= 0) return;
    if (sums_.data() == nullptr) throw Error(ErrorKind::internal, "a finished Hessian cannot take more inputs");
    const std::int64_t k = columns_;
    for (std::int64_t t0 = 0; t0 < tokens; t0 += chunk_tokens) {
        const std::int64_t n = std::min(chunk_tokens, tokens - t0);
        const float* x = inputs + t0 * k;
        if (compute_dtype() == ComputeDtype::bf16 && bf16_exact(x, static_cast<std::size_t>(n * k))) {
            std::uint16_t* narrowed = working_buffer(bf16_, DType::BF16, n).data_as<std::uint16_t>();
            parallel_for(0, static_cast<std::size_t>(n), 64, [&](std::size_t first, std::size_t last) {
                for (std::size_t i = first * k; i < last * k; ++i)  // the upper halves, exactly
                    narrowed[i] = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(x[i]) >> 16);
            });
            add_bf16_rows(narrowed, n);
            continue;
        }
        // A = fl32(sqrt 2) * x, rounded per element as the reference does, then H += A^T A.
        float* a = working_buffer(scaled_, DType::F32, n).data_as<float>();
        parallel_for(0, static_cast<std::size_t>(n), 64, [&](std::size_t first, std::size_t last) {
            for (std::size_t i = first * k; i < last * k; ++i) a[i] = x[i] * root2;
        });
        add_scaled_rows(n);
    }
}

void HessianAccumulator::add_scaled_rows(std::int64_t tokens) {
    const std::int64_t k = columns_;
    const float* a = scaled_.data_as<float>();
    const float beta = added_ ? 1.0f : 0.0f;
    for_each_upper_tile(k, sums_.data_as<float>(), [&](std::int64_t r0, std::int64_t rn, std::int64_t c0, std::int64_t cn, float* c) {
        f32_gemm(true, false, rn, cn, tokens, 1.0f, a + r0, k, a + c0, k, beta, c, k);
    });
    added_ = true;
}

void HessianAccumulator::add(const TensorView& inputs) {
    if (inputs.shape.size() != 2 || inputs.shape[1] != columns_)
        throw Error(ErrorKind::input, "calibration inputs are " + shape_to_string(inputs.shape) + ", expected [tokens, " +
                                          std::to_string(columns_) + "]");
    const std::int64_t tokens = inputs.shape[0];
    if (inputs.dtype == DType::F32) {
        add(reinterpret_cast<const float*>(inputs.data()), tokens);
        return;
    }
    if (inputs.dtype != DType::BF16)
        throw Error(ErrorKind::input, "calibration inputs must be BF16 or F32, not " + std::string(dtype_name(inputs.dtype)));
    if (sums_.data() == nullptr) throw Error(ErrorKind::internal, "a finished Hessian cannot take more inputs");
    const auto* bits = reinterpret_cast<const std::uint16_t*>(inputs.data());
    const std::int64_t k = columns_;
    for (std::int64_t t0 = 0; t0 < tokens; t0 += chunk_tokens) {
        const std::int64_t n = std::min(chunk_tokens, tokens - t0);
        if (compute_dtype() == ComputeDtype::bf16) {  // BF16 is exact: its bits, read in place
            add_bf16_rows(bits + t0 * k, n);
            continue;
        }
        // FP32 products: each value widened and scaled by fl32(sqrt 2) in one pass, the values
        // add(const float*) would compute from the widened copy.
        float* a = working_buffer(scaled_, DType::F32, n).data_as<float>();
        const std::uint16_t* x = bits + t0 * k;
        parallel_for(0, static_cast<std::size_t>(n), 64, [&](std::size_t first, std::size_t last) {
            for (std::size_t i = first * k; i < last * k; ++i)
                a[i] = std::bit_cast<float>(static_cast<std::uint32_t>(x[i]) << 16) * root2;
        });
        add_scaled_rows(n);
    }
}

Tensor HessianAccumulator::finish(std::int64_t samples) {
    if (samples <= 0) throw Error(ErrorKind::input, "the Hessian needs at least one calibration sample");
    if (sums_.data() == nullptr) throw Error(ErrorKind::internal, "a Hessian can be finished once");
    const std::int64_t k = columns_;
    float* h = sums_.data_as<float>();
    if (!added_) {  // no token: H = 0
        parallel_for(0, static_cast<std::size_t>(k), 64, [&](std::size_t first, std::size_t last) {
            std::fill(h + first * k, h + last * k, 0.0f);
        });
        return std::move(sums_);
    }
    const float n = static_cast<float>(samples);
    // First the lower triangle from the upper one, in 64 x 64 blocks so that both the row-wise
    // writes and the column-wise reads stay in cache; then the upper one scaled in place.
    constexpr std::int64_t block = 64;
    const std::int64_t blocks = (k + block - 1) / block;
    parallel_for(0, static_cast<std::size_t>(blocks), 1, [&](std::size_t first, std::size_t last) {
        for (std::size_t ib = first; ib < last; ++ib) {
            const std::int64_t i0 = static_cast<std::int64_t>(ib) * block, i1 = std::min(i0 + block, k);
            for (std::int64_t j0 = 0; j0 <= i0; j0 += block)
                for (std::int64_t i = i0; i < i1; ++i)
                    for (std::int64_t j = j0; j < std::min({j0 + block, i, k}); ++j) h[i * k + j] = h[j * k + i] / n;
        }
    });
    parallel_for(0, static_cast<std::size_t>(k), 64, [&](std::size_t first, std::size_t last) {
        for (std::size_t i = first; i < last; ++i)
            for (std::int64_t j = static_cast<std::int64_t>(i); j < k; ++j) h[i * k + j] /= n;
    });
    return std::move(sums_);
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
