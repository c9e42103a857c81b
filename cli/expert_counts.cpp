#include "expert_counts.hpp"

#include <algorithm>

namespace moequant::cli {

std::string count_spread(std::vector<std::int64_t> counts) {
    if (counts.empty()) return {};
    std::sort(counts.begin(), counts.end());
    return "fewest " + std::to_string(counts.front()) + ", median " + std::to_string(counts[counts.size() / 2]) + ", most " +
           std::to_string(counts.back());
}

std::string layer_expert_list(const std::vector<std::pair<std::int64_t, std::vector<std::int64_t>>>& layers) {
    std::string text;
    for (const auto& [layer, ids] : layers) {
        if (ids.empty()) continue;
        text += std::string(text.empty() ? "" : "; ") + "layer " + std::to_string(layer) + ": ";
        for (std::size_t i = 0; i < ids.size(); ++i) text += (i ? "," : "") + std::to_string(ids[i]);
    }
    return text;
}

}  // namespace moequant::cli
