#include "amx_backward_weights.hpp"

#include <algorithm>
#include <cmath>

namespace moequant::amx {

std::vector<std::uint16_t> transposed_bf16(const std::uint16_t* bf16, std::int64_t n, std::int64_t k) {
    std::vector<std::uint16_t> out(static_cast<std::size_t>(n * k));
    // 32x32 tiles keep both the reads and the writes within a few cache lines.
    constexpr std::int64_t tile = 32;
    for (std::int64_t r0 = 0; r0 < n; r0 += tile)
        for (std::int64_t c0 = 0; c0 < k; c0 += tile)
            for (std::int64_t r = r0; r < std::min(n, r0 + tile); ++r)
                for (std::int64_t c = c0; c < std::min(k, c0 + tile); ++c)
                    out[static_cast<std::size_t>(c * n + r)] = bf16[r * k + c];
    return out;
}

std::string backward_bound_problem(const Tensor& decoded, const Tensor& bounds, const std::vector<float>& source,
                                   std::int64_t n, std::int64_t k) {
    const float* d = decoded.data_as<float>();
    const float* b = bounds.data_as<float>();
    std::int64_t beyond = 0, non_finite = 0;
    double worst = 0;
    for (std::int64_t r = 0; r < k; ++r)  // row r of the backward matrix is column r of the source
        for (std::int64_t c = 0; c < n; ++c) {
            const float value = d[r * n + c];
            if (!std::isfinite(value)) {
                ++non_finite;
                continue;
            }
            const double err = std::fabs(static_cast<double>(source[static_cast<std::size_t>(c * k + r)]) - value);
            if (err > b[r]) ++beyond;
            if (b[r] > 0) worst = std::max(worst, err / b[r]);
            else if (err > 0) worst = INFINITY;
        }
    std::string problem;
    if (non_finite) problem = std::to_string(non_finite) + " NaN or Inf decoded value(s)";
    if (beyond)
        problem += (problem.empty() ? "" : "; ") + std::to_string(beyond) +
                   " element(s) beyond the error bound of the transposed source (worst at " + std::to_string(worst) +
                   "x the bound)";
    return problem;
}

}  // namespace moequant::amx
