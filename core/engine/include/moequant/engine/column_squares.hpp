// llama-imatrix's per-column statistics of the inputs a matrix sees: each column's sum of squares
// (an imatrix file's in_sum2) and sum (in_sum) over the rows, in double, and the row count
// (counts). The mean square is computed as llama-quantize computes it from an imatrix file — the
// sums and the count stored as F32, then divided in F32 — so that the weights `convert
// --calibrate` measures on the way equal, bit for bit, those of the file `record --imatrix`
// writes from the same measurement (docs/gguf-imatrix.md).
#pragma once

#include <moequant/importance.hpp>

#include <cstdint>
#include <vector>

namespace moequant {

struct ColumnStatistics {
    std::vector<double> squares;
    std::vector<double> sums;
    std::int64_t tokens = 0;
};

class ColumnSquares {
public:
    explicit ColumnSquares(std::int64_t cols);
    // `rows` rows of cols() floats, row after row.
    void add(const float* rows, std::int64_t count);
    std::int64_t cols() const noexcept { return static_cast<std::int64_t>(statistics_.squares.size()); }
    const ColumnStatistics& statistics() const noexcept { return statistics_; }
    ColumnStatistics take() noexcept { return std::move(statistics_); }
    ColumnImportance mean() const;

private:
    ColumnStatistics statistics_;
};

// Each column's mean square; 1 for every column when no row was added (llama.cpp's stand-in for
// an expert no calibration token reached). `tokens` is the row count.
ColumnImportance mean_squares(const ColumnStatistics& statistics);

}  // namespace moequant
