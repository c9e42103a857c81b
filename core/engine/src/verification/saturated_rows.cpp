#include <moequant/engine/saturated_rows.hpp>
#include <moequant/printable.hpp>

#include <algorithm>

namespace moequant {

void SaturatedRowLog::add(const std::string& tensor, Projection projection, int part, int parts, std::int64_t part_rows,
                          const std::vector<std::int64_t>& rows) {
    if (rows.empty()) return;
    // split_expert_part(): parts of down_proj split its columns, the others their rows.
    const std::int64_t first_row = projection == Projection::down || parts <= 1 ? 0 : part * part_rows;
    std::lock_guard lock(mutex_);
    for (std::int64_t r : rows) rows_.emplace_back(tensor, first_row + r);
}

std::size_t SaturatedRowLog::size() const {
    std::lock_guard lock(mutex_);
    return rows_.size();
}

std::string SaturatedRowLog::warning(std::size_t shown) const {
    std::lock_guard lock(mutex_);
    if (rows_.empty()) return {};
    std::vector<std::pair<std::string, std::int64_t>> sorted = rows_;
    std::sort(sorted.begin(), sorted.end());  // parts arrive from many threads in any order
    std::string line = std::to_string(sorted.size()) +
                       " row(s) have max |w| below about 3.3e-37, where 1/scale overflows: their codes are saturated, "
                       "as the runtime's own quantization makes them (";
    for (std::size_t i = 0; i < std::min(shown, sorted.size()); ++i)
        line += (i ? ", " : "") + printable_name(sorted[i].first) + " row " + std::to_string(sorted[i].second);
    if (sorted.size() > shown) line += ", and " + std::to_string(sorted.size() - shown) + " more";
    return line + ")";
}

}  // namespace moequant
