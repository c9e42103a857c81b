#include "sample_batches.hpp"

#include <moequant/engine/cluster.hpp>

#include <algorithm>
#include <tuple>

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
    // As few batches as the limit allows, of about equal tokens: batch k ends where the running
    // total passes (k+1)/n of all tokens, and never beyond the limit. Equal batches make equal
    // shares for the ranks (a greedy fill would leave a short last one).
    std::int64_t total = 0;
    for (std::int64_t n : lengths) total += n;
    const std::int64_t count = std::max<std::int64_t>(1, (total + limit - 1) / std::max<std::int64_t>(limit, 1));
    std::vector<std::pair<std::size_t, std::size_t>> batches;
    std::int64_t before = 0;  // tokens in the batches so far
    for (std::size_t i = 0; i < lengths.size();) {
        const std::int64_t k = static_cast<std::int64_t>(batches.size());
        const std::int64_t target = std::max(before + 1, total * std::min(k + 1, count) / count);  // where this batch should end
        std::size_t j = i + 1;
        std::int64_t n = lengths[i];
        while (j < lengths.size() && n + lengths[j] <= limit && before + n + lengths[j] <= target) n += lengths[j++];
        batches.emplace_back(i, j);
        before += n;
        i = j;
    }
    return batches;
}

std::int64_t block_token_limit(std::uint64_t budget, std::int64_t hidden, std::int64_t all) {
    return std::min(calibration_block_tokens, batch_token_limit(budget, hidden, all));
}

RankBlocks rank_blocks(const std::vector<std::int64_t>& lengths, std::int64_t limit, int rank, int ranks) {
    RankBlocks r;
    r.blocks = sample_batches(lengths, limit);
    std::int64_t start = 0;
    std::vector<std::int64_t> starts;  // each block's first token
    for (const auto& [first, last] : r.blocks) {
        std::int64_t n = 0;
        for (std::size_t i = first; i < last; ++i) n += lengths[i];
        starts.push_back(start);
        r.block_tokens.push_back(n);
        start += n;
    }
    std::tie(r.first, r.last) = rank_share(r.block_tokens, rank, ranks);
    if (r.first < r.last) r.first_token = starts[r.first];
    for (std::size_t b = r.first; b < r.last; ++b) r.tokens += r.block_tokens[b];
    return r;
}

}  // namespace moequant::detail
