#include "config_counts.hpp"

#include <moequant/error.hpp>

namespace moequant::adapters {
namespace {

// Far above any real model (head counts reach 128, head sizes 1024, ranks 1536), and low enough
// that a product of three such counts fits in 64 bits: the decoders multiply them into expected
// weight shapes before the checkpoint's real shapes are compared.
constexpr std::int64_t count_limit = std::int64_t{1} << 20;

std::int64_t checked_positive(const ModelConfig& config, std::string_view key, std::int64_t value) {
    positive_value(config, key, value);
    if (value > count_limit)
        throw Error(ErrorKind::input,
                    "'" + std::string(key) + "' = " + std::to_string(value) + " is beyond any decoder (at most " +
                        std::to_string(count_limit) + ")",
                    {.file = config.source(), .code = "InvalidConfig"});
    return value;
}

}  // namespace

std::int64_t positive_value(const ModelConfig& config, std::string_view key, std::int64_t value) {
    if (value <= 0)
        throw Error(ErrorKind::input, "'" + std::string(key) + "' must be positive, got " + std::to_string(value),
                    {.file = config.source(), .code = "InvalidConfig"});
    return value;
}

std::int64_t positive_int(const ModelConfig& config, std::string_view key) {
    return checked_positive(config, key, config.require_int(key));
}

std::int64_t positive_int_or(const ModelConfig& config, std::string_view key, std::int64_t fallback) {
    return checked_positive(config, key, config.int_or(key, fallback));
}

}  // namespace moequant::adapters
