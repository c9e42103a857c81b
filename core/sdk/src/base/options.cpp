#include <moequant/error.hpp>
#include <moequant/options.hpp>

#include <charconv>
#include <cstdlib>

namespace moequant {
namespace {

[[noreturn]] void bad_value(std::string_view key, const std::string& value, const char* expected) {
    throw_usage_error("option '" + std::string(key) + "' must be " + expected + ", got '" + value + "'");
}

// `value` (of option `key`) read whole as a T, `fallback` when absent.
template <class T>
T number_or(std::string_view key, const std::optional<std::string>& value, T fallback, const char* expected) {
    if (!value) return fallback;
    T out{};
    const auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), out);
    if (ec != std::errc() || end != value->data() + value->size() || value->empty()) bad_value(key, *value, expected);
    return out;
}

}  // namespace

Options::Options(std::initializer_list<std::pair<std::string, std::string>> items) {
    for (const auto& [k, v] : items) set(k, v);
}

void Options::set(std::string key, std::string value) {
    for (auto& [k, v] : items_)
        if (k == key) {
            v = std::move(value);
            return;
        }
    items_.emplace_back(std::move(key), std::move(value));
}

bool Options::has(std::string_view key) const noexcept {
    for (const auto& [k, v] : items_)
        if (k == key) return true;
    return false;
}

std::optional<std::string> Options::get(std::string_view key) const {
    for (const auto& [k, v] : items_)
        if (k == key) return v;
    return std::nullopt;
}

std::string Options::get_string(std::string_view key, const std::string& fallback) const {
    return get(key).value_or(fallback);
}

std::int64_t Options::get_int(std::string_view key, std::int64_t fallback) const {
    return number_or(key, get(key), fallback, "an integer");
}

double Options::get_double(std::string_view key, double fallback) const {
    return number_or(key, get(key), fallback, "a number");
}

bool Options::get_bool(std::string_view key, bool fallback) const {
    auto v = get(key);
    if (!v) return fallback;
    if (*v == "true" || *v == "1" || *v == "yes" || *v == "on") return true;
    if (*v == "false" || *v == "0" || *v == "no" || *v == "off") return false;
    bad_value(key, *v, "true or false");
}

}  // namespace moequant
