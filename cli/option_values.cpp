#include "option_values.hpp"

#include <moequant/error.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <typeinfo>

namespace moequant::cli {

namespace po = boost::program_options;

namespace {

// The value as a double when the option holds a number.
std::optional<double> number(const boost::any& value) {
    const std::type_info& t = value.type();
    if (t == typeid(int)) return boost::any_cast<int>(value);
    if (t == typeid(long)) return static_cast<double>(boost::any_cast<long>(value));
    if (t == typeid(long long)) return static_cast<double>(boost::any_cast<long long>(value));
    if (t == typeid(unsigned)) return boost::any_cast<unsigned>(value);
    if (t == typeid(unsigned long)) return static_cast<double>(boost::any_cast<unsigned long>(value));
    if (t == typeid(unsigned long long)) return static_cast<double>(boost::any_cast<unsigned long long>(value));
    if (t == typeid(float)) return boost::any_cast<float>(value);
    if (t == typeid(double)) return boost::any_cast<double>(value);
    return std::nullopt;
}

}  // namespace

void check_numeric_options(const po::parsed_options& parsed, const po::variables_map& vm) {
    for (const auto& option : parsed.options) {
        const auto it = vm.find(option.string_key);
        if (it == vm.end() || option.value.empty()) continue;
        const std::optional<double> v = number(it->second.value());
        if (!v) continue;
        const std::string& text = option.value.back();
        const std::string given = "--" + option.string_key + " '" + text + "'";
        // The text, not the parsed value: an unsigned option has already wrapped a minus sign.
        const std::size_t first = text.find_first_not_of(" \t");
        if (first != std::string::npos && text[first] == '-')
            throw_usage_error(given + ": the value must not be negative", {.code = "BadOptionValue"});
        if (!std::isfinite(*v))
            throw_usage_error(given + ": the value must be a finite number", {.code = "BadOptionValue"});
    }
}

void require_positive(const po::variables_map& vm, std::initializer_list<const char*> names) {
    for (const char* name : names) {
        const auto it = vm.find(name);
        if (it == vm.end() || it->second.defaulted()) continue;
        if (const std::optional<double> v = number(it->second.value()); v && *v <= 0)
            throw_usage_error(std::string("--") + name + " must be positive, got 0", {.code = "BadOptionValue"});
    }
}

std::uint64_t memory_limit_bytes(double gigabytes) {
    const double bytes = gigabytes * 1e9;
    constexpr auto most = std::numeric_limits<std::uint64_t>::max();
    if (bytes >= static_cast<double>(most)) return most;
    // A positive limit below one byte is still a limit, not "none".
    return gigabytes > 0 ? std::max<std::uint64_t>(1, static_cast<std::uint64_t>(bytes)) : 0;
}

}  // namespace moequant::cli
