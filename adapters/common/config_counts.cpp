#include "config_counts.hpp"

#include <moequant/error.hpp>

namespace moequant::adapters {
namespace {

std::int64_t checked_positive(const ModelConfig& config, std::string_view key, std::int64_t value) {
    if (value <= 0)
        throw Error(ErrorKind::input, "'" + std::string(key) + "' must be positive, got " + std::to_string(value),
                    {.file = config.source(), .code = "InvalidConfig"});
    return value;
}

}  // namespace

std::int64_t positive_int(const ModelConfig& config, std::string_view key) {
    return checked_positive(config, key, config.require_int(key));
}

std::int64_t positive_int_or(const ModelConfig& config, std::string_view key, std::int64_t fallback) {
    return checked_positive(config, key, config.int_or(key, fallback));
}

}  // namespace moequant::adapters
