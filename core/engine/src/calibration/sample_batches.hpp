// How the forward passes over tokenized samples (sequential calibration, eval) split them into
// batches of whole samples under a memory budget.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace moequant::detail {

// The largest block of samples a forward call runs (unless a sample alone is longer): blocks are
// the unit ranks share, fixed by the data so the bytes do not depend on the number of ranks.
inline constexpr std::int64_t calibration_block_tokens = 2048;

// Tokens a batch may hold so that its forward's working memory (about 32 floats per token and
// hidden unit) fits `budget` bytes; `all` (every token) when the budget is 0 (no limit).
std::int64_t batch_token_limit(std::uint64_t budget, std::int64_t hidden, std::int64_t all);

// [first sample, last sample) per batch: consecutive whole samples of at most `limit` tokens
// together, at least one sample each; as few batches as the limit allows, of about equal tokens.
std::vector<std::pair<std::size_t, std::size_t>> sample_batches(const std::vector<std::int64_t>& lengths, std::int64_t limit);

// The most tokens a block may hold: calibration_block_tokens, or fewer so that its working memory
// fits `budget` (batch_token_limit).
std::int64_t block_token_limit(std::uint64_t budget, std::int64_t hidden, std::int64_t all);

// The fixed blocks of a run (sample_batches under `limit`) and the contiguous run of them rank
// `rank` of `ranks` takes, balanced by tokens (rank_share): the same on every rank.
struct RankBlocks {
    std::vector<std::pair<std::size_t, std::size_t>> blocks;  // [first sample, last sample) each
    std::vector<std::int64_t> block_tokens;                   // each block's tokens
    std::size_t first = 0, last = 0;                          // this rank's blocks
    std::int64_t first_token = 0, tokens = 0;                 // its first token, its token count
};
RankBlocks rank_blocks(const std::vector<std::int64_t>& lengths, std::int64_t limit, int rank, int ranks);

}  // namespace moequant::detail
