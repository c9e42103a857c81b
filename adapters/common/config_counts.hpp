// Counts from config.json that divide or size a decoder's work (head counts, head sizes, layer
// intervals): each must be positive and at most 2^20, else Error(input, InvalidConfig) naming
// config.json and the key. A zero head count used to end in SIGFPE; a huge one would overflow the
// expected weight shapes the decoders compute from them.
#pragma once

#include <moequant/model_config.hpp>

#include <cstdint>
#include <string_view>

namespace moequant::adapters {

// `value` (read from `key`) when positive, else Error(input, InvalidConfig); no upper bound.
std::int64_t positive_value(const ModelConfig& config, std::string_view key, std::int64_t value);

std::int64_t positive_int(const ModelConfig& config, std::string_view key);
// `fallback` when the key is absent (or null); a present value must be positive.
std::int64_t positive_int_or(const ModelConfig& config, std::string_view key, std::int64_t fallback);

}  // namespace moequant::adapters
