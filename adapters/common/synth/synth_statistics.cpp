#include "synth_statistics.hpp"

#include <algorithm>
#include <cmath>

namespace moequant::adapters {

std::vector<float> low_rank_embeddings(SynthRandom& random, std::int64_t rows, std::int64_t cols, double scale) {
    constexpr double noise = 0.3;
    const std::int64_t rank = std::max<std::int64_t>(1, cols / 8);
    std::vector<double> directions(static_cast<std::size_t>(rank * cols)), weights(static_cast<std::size_t>(rank));
    for (double& a : directions) a = random.normal();
    const double norm = std::sqrt(static_cast<double>(rank));
    std::vector<float> out(static_cast<std::size_t>(rows * cols));
    for (std::int64_t i = 0; i < rows; ++i) {
        for (double& z : weights) z = random.normal();
        for (std::int64_t j = 0; j < cols; ++j) {
            double shared = 0;
            for (std::int64_t k = 0; k < rank; ++k) shared += weights[static_cast<std::size_t>(k)] * directions[static_cast<std::size_t>(k * cols + j)];
            out[static_cast<std::size_t>(i * cols + j)] = static_cast<float>(scale * (shared / norm + noise * random.normal()));
        }
    }
    return out;
}

double trained_norm_gain(SynthRandom& random) noexcept {
    const double root = 0.7 + 0.4 * random.normal();
    return 0.05 + root * root;
}

}  // namespace moequant::adapters
