#include <moequant/engine/column_squares.hpp>

namespace moequant {

ColumnSquares::ColumnSquares(std::int64_t cols) {
    statistics_.squares.assign(static_cast<std::size_t>(cols), 0.0);
    statistics_.sums.assign(static_cast<std::size_t>(cols), 0.0);
}

void ColumnSquares::add(const float* rows, std::int64_t count) {
    double* squares = statistics_.squares.data();
    double* sums = statistics_.sums.data();
    const std::size_t cols = statistics_.squares.size();
    for (std::int64_t r = 0; r < count; ++r) {
        const float* row = rows + static_cast<std::size_t>(r) * cols;
        for (std::size_t c = 0; c < cols; ++c) {
            squares[c] += static_cast<double>(row[c]) * row[c];
            sums[c] += row[c];
        }
    }
    statistics_.tokens += count;
}

ColumnImportance ColumnSquares::mean() const { return mean_squares(statistics_); }

ColumnImportance mean_squares(const ColumnStatistics& statistics) {
    ColumnImportance out;
    out.tokens = statistics.tokens;
    out.weights.assign(statistics.squares.size(), 1.0f);
    if (statistics.tokens <= 0) return out;
    // F32 / F32, as llama-quantize divides an imatrix file's in_sum2 by its counts.
    const auto count = static_cast<float>(statistics.tokens);
    for (std::size_t c = 0; c < statistics.squares.size(); ++c) out.weights[c] = static_cast<float>(statistics.squares[c]) / count;
    return out;
}

}  // namespace moequant
