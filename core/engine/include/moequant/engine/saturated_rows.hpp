// Rows whose codes a quantizer saturates (Quantizer::saturated_rows()), gathered over a convert
// or verify run so the user gets one warning naming them. Such rows are accepted as written
// (the runtime's own arithmetic writes the same codes), so the warning is all there is to say.
#pragma once

#include <moequant/model_adapter.hpp>

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace moequant {

class SaturatedRowLog {
public:
    // `rows` of threadpool part `part` of `parts` (part_rows rows) of the source matrix `tensor`,
    // as rows of the source matrix: gate and up parts are row slices, down parts column slices.
    // Thread-safe.
    void add(const std::string& tensor, Projection projection, int part, int parts, std::int64_t part_rows,
             const std::vector<std::int64_t>& rows);

    std::size_t size() const;

    // One line (without "warning: ") naming the first `shown` rows in (tensor, row) order and
    // how many more there are; empty when there are none.
    std::string warning(std::size_t shown = 5) const;

private:
    mutable std::mutex mutex_;
    std::vector<std::pair<std::string, std::int64_t>> rows_;
};

}  // namespace moequant
