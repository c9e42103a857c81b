// How the coverage lines of gptq, convert --calibrate and eval write per-expert token counts:
// their spread in one phrase, and the experts of several layers in one list.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace moequant::cli {

// "fewest 3, median 40, most 212" (the median by nearest rank); empty for no counts.
std::string count_spread(std::vector<std::int64_t> counts);

// "layer 3: 5,9; layer 7: 1" for (layer, expert ids) pairs, skipping layers with none.
std::string layer_expert_list(const std::vector<std::pair<std::int64_t, std::vector<std::int64_t>>>& layers);

}  // namespace moequant::cli
