#include "sample_batches.hpp"

#include <algorithm>

namespace moequant::detail {

namespace {

// Float32 values a batch's forward keeps per token and hidden unit, roughly (q/k/v of all heads,
// the attention output, the MLP block's input and output, an expert's intermediate).
constexpr std::int64_t working_floats_per_hidden = 32;

}  // namespace

std::int64_t batch_token_limit(std::uint64_t budget, std::int64_t hidden, std::int64_t all) {
    if (budget == 0) return all;
    return std::max<std::int64_t>(1, static_cast<std::int64_t>(budget / sizeof(float)) / (hidden * working_floats_per_hidden));
}

std::vector<std::pair<std::size_t, std::size_t>> sample_batches(const std::vector<std::int64_t>& lengths, std::int64_t limit) {
    std::vector<std::pair<std::size_t, std::size_t>> batches;
    for (std::size_t i = 0; i < lengths.size();) {
        std::size_t j = i + 1;
        std::int64_t n = lengths[i];
        while (j < lengths.size() && n + lengths[j] <= limit) n += lengths[j++];
        batches.emplace_back(i, j);
        i = j;
    }
    return batches;
}

}  // namespace moequant::detail
