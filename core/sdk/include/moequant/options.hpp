// Options handed to plugins: ordered string key/value pairs with typed getters.
//
// Options cross the plugin boundary as plain strings (no Boost types); each plugin reads the
// keys it understands. Typed getters throw Error(usage) naming the option when a value does
// not parse.
#pragma once

#include <moequant/export.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moequant {

class MOEQUANT_API Options {
public:
    Options() = default;
    Options(std::initializer_list<std::pair<std::string, std::string>> items);

    // Sets (or replaces) a value.
    void set(std::string key, std::string value);
    bool has(std::string_view key) const noexcept;
    std::optional<std::string> get(std::string_view key) const;

    std::string get_string(std::string_view key, const std::string& fallback) const;
    std::int64_t get_int(std::string_view key, std::int64_t fallback) const;
    double get_double(std::string_view key, double fallback) const;
    // Accepts true/false, 1/0, yes/no, on/off.
    bool get_bool(std::string_view key, bool fallback) const;

    const std::vector<std::pair<std::string, std::string>>& items() const noexcept { return items_; }

private:
    std::vector<std::pair<std::string, std::string>> items_;
};

}  // namespace moequant
