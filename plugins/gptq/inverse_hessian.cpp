#include "inverse_hessian.hpp"

#include <moequant/error.hpp>
#include <moequant/parallel.hpp>

#include <Eigen/Cholesky>
#include <Eigen/Core>

#include <algorithm>
#include <numeric>

namespace moequant::gptq {

namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using MatrixRef = Eigen::Ref<Matrix>;

// A k x k working matrix in a Tensor's buffer, whose pages are populated at once (tensor.cpp)
// rather than faulted in one at a time as Eigen's own allocation would be.
struct WorkMatrix {
    explicit WorkMatrix(Eigen::Index rows, Eigen::Index cols)
        : storage(Tensor::uninitialized(DType::F32, {cols, rows})), m(storage.data_as<float>(), rows, cols) {}
    Tensor storage;
    Eigen::Map<Matrix, Eigen::Aligned64> m;
};

constexpr Eigen::Index panel = 512;  // Cholesky block and trailing-update tile
constexpr std::size_t strip = 512;   // rows or columns per task of the triangular products

// In-place inverse of the lower-triangular block [at, at+n) of `m`, recursively:
// inv([A 0; B C]) = [A^-1 0; -C^-1 B A^-1  C^-1]. The halves are independent and run in
// parallel; the products are triangular-by-dense, so the work is about n^3/6 multiply-adds.
void invert_lower(MatrixRef m, Eigen::Index at, Eigen::Index n) {
    if (n <= 128) {
        Matrix block = m.block(at, at, n, n);
        m.block(at, at, n, n) = block.triangularView<Eigen::Lower>().solve(Matrix::Identity(n, n));
        return;
    }
    const Eigen::Index h = n / 2;
    parallel_for(0, 2, 1, [&](std::size_t first, std::size_t last) {
        for (std::size_t i = first; i < last; ++i) invert_lower(m, i == 0 ? at : at + h, i == 0 ? h : n - h);
    });
    auto a_inv = m.block(at, at, h, h);
    auto b = m.block(at + h, at, n - h, h);
    auto c_inv = m.block(at + h, at + h, n - h, n - h);
    // Most of the work is in these two products: split them into independent strips.
    WorkMatrix work(n - h, h);
    auto& ba = work.m;
    parallel_for(0, static_cast<std::size_t>(n - h), strip, [&](std::size_t first, std::size_t last) {
        const auto rows = static_cast<Eigen::Index>(last - first);
        ba.middleRows(first, rows).noalias() = b.middleRows(first, rows) * a_inv.triangularView<Eigen::Lower>();
    });
    parallel_for(0, static_cast<std::size_t>(h), strip, [&](std::size_t first, std::size_t last) {
        const auto cols = static_cast<Eigen::Index>(last - first);
        b.middleCols(first, cols).noalias() = -(c_inv.triangularView<Eigen::Lower>() * ba.middleCols(first, cols));
    });
}

// In-place lower Cholesky factor of `m` (its lower triangle), blocked right-looking: factor a
// diagonal block, solve the panel below it, update the trailing lower triangle tile by tile.
// The panel solve and the tiles run in parallel (Eigen's own LLT is single-threaded). False
// when the matrix is not positive definite.
bool cholesky_lower(MatrixRef m) {
    const Eigen::Index k = m.rows();
    for (Eigen::Index j = 0; j < k; j += panel) {
        const Eigen::Index b = std::min(panel, k - j), rest = k - j - b;
        MatrixRef a11 = m.block(j, j, b, b);
        Eigen::LLT<Eigen::Ref<Matrix>> diagonal(a11);  // in place
        if (diagonal.info() != Eigen::Success) return false;
        if (rest == 0) break;
        const auto l11 = m.block(j, j, b, b).triangularView<Eigen::Lower>();
        parallel_for(0, static_cast<std::size_t>(rest), strip, [&](std::size_t first, std::size_t last) {
            auto rows = m.block(j + b + static_cast<Eigen::Index>(first), j, static_cast<Eigen::Index>(last - first), b);
            l11.transpose().solveInPlace<Eigen::OnTheRight>(rows);  // A21 L11^-T
        });
        const Eigen::Index tiles = (rest + panel - 1) / panel;
        std::vector<std::pair<Eigen::Index, Eigen::Index>> work;
        for (Eigen::Index r = 0; r < tiles; ++r)
            for (Eigen::Index c = 0; c <= r; ++c) work.emplace_back(r, c);
        const auto a21 = m.block(j + b, j, rest, b);
        parallel_for(0, work.size(), 1, [&](std::size_t first, std::size_t last) {
            for (std::size_t w = first; w < last; ++w) {
                const Eigen::Index r0 = work[w].first * panel, c0 = work[w].second * panel;
                const Eigen::Index rn = std::min(panel, rest - r0), cn = std::min(panel, rest - c0);
                m.block(j + b + r0, j + b + c0, rn, cn).noalias() -= a21.middleRows(r0, rn) * a21.middleRows(c0, cn).transpose();
            }
        });
    }
    return true;
}

}  // namespace

InverseHessian prepare_inverse_hessian(const Tensor& hessian, const Scheme& scheme) {
    if (hessian.dtype() != DType::F32 || hessian.shape().size() != 2 || hessian.shape()[0] != hessian.shape()[1])
        throw Error(ErrorKind::internal, "the Hessian must be a square F32 matrix, not " + shape_to_string(hessian.shape()));
    const std::int64_t k = hessian.shape()[0];
    const float* h = hessian.data_as<float>();
    InverseHessian r;
    r.columns = k;
    r.order.resize(k);
    std::iota(r.order.begin(), r.order.end(), 0);
    if (scheme.actorder != ActOrder::none)  // ties only between dead columns, whose order does not matter
        std::stable_sort(r.order.begin(), r.order.end(),
                         [&](std::int32_t a, std::int32_t b) { return h[a * k + a] > h[b * k + b]; });

    // The permuted H, stored reversed (index K-1-i): the lower Cholesky factor Lr of the
    // reversed matrix gives H = R R^T with R = reverse(Lr) upper, so U = R^-1 = reverse(Lr^-1)
    // is H^-1's upper Cholesky factor from one factorization and one triangular inverse.
    // Column rev(j) of the reversed matrix is row order[j] of H (symmetric) read at order[i]:
    // a gather within one row that stays in cache.
    WorkMatrix work(k, k);
    auto& m = work.m;
    auto rev = [k](std::int64_t i) { return k - 1 - i; };
    parallel_for(0, static_cast<std::size_t>(k), 64, [&](std::size_t first, std::size_t last) {
        for (std::size_t j = first; j < last; ++j) {
            const float* row = h + static_cast<std::int64_t>(r.order[j]) * k;
            float* column = m.col(rev(static_cast<std::int64_t>(j))).data();
            for (std::int64_t i = 0; i < k; ++i) column[rev(i)] = row[r.order[i]];
        }
    });
    r.dead.assign(k, 0);
    double diagonal_sum = 0;
    for (std::int64_t i = 0; i < k; ++i) {
        float& d = m(rev(i), rev(i));
        if (d == 0) {
            d = 1;
            r.dead[i] = 1;
        }
        diagonal_sum += d;
    }
    // fp32 product, as torch computes percdamp * mean(diag(H)).
    const float damp = static_cast<float>(scheme.dampening_frac) * static_cast<float>(diagonal_sum / k);
    for (std::int64_t i = 0; i < k; ++i) m(i, i) += damp;

    if (!cholesky_lower(m)) {  // §4.2: GPTQ degenerates to rounding
        r.factored = false;
        r.upper = Tensor(DType::F32, {k, k});
        for (std::int64_t i = 0; i < k; ++i) r.upper.data_as<float>()[i * k + i] = 1;
        return r;
    }
    invert_lower(m, 0, k);
    // U[i][j] = Lr^-1(rev(i), rev(j)) for j >= i, zero below, made in the working buffer itself
    // (no second k x k buffer to fault in). Read as a row-major matrix D, that buffer holds
    // Lr^-1 in its upper triangle (D[c][r] = Lr^-1(r, c)), and U[i][j] = D[k-1-j][k-1-i]: U is D
    // reflected across its anti-diagonal, an involution that maps D's upper triangle onto
    // itself. Each pair is swapped once, by the block row of its element above the
    // anti-diagonal (i + j < k - 1); 64 x 64 blocks keep both sides in cache.
    float* d = m.data();
    constexpr std::int64_t block = 64;
    parallel_for(0, static_cast<std::size_t>((k + block - 1) / block), 1, [&](std::size_t first, std::size_t last) {
        for (std::size_t b = first; b < last; ++b) {
            const std::int64_t i0 = static_cast<std::int64_t>(b) * block, i1 = std::min(i0 + block, k);
            for (std::int64_t j0 = i0; j0 < k; j0 += block)
                for (std::int64_t i = i0; i < i1; ++i)
                    for (std::int64_t j = std::max(j0, i); j < std::min({j0 + block, k, k - 1 - i}); ++j)
                        std::swap(d[i * k + j], d[(k - 1 - j) * k + (k - 1 - i)]);
        }
    });
    parallel_for(0, static_cast<std::size_t>(k), 64, [&](std::size_t first, std::size_t last) {
        for (std::size_t i = first; i < last; ++i) std::fill_n(d + i * k, i, 0.0f);
    });
    r.upper = std::move(work.storage);
    return r;
}

}  // namespace moequant::gptq
