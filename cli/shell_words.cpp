#include "shell_words.hpp"

#include <cctype>
#include <string_view>

namespace moequant::cli {

std::string shell_word(const std::string& text) {
    bool safe = !text.empty();
    for (char c : text)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || std::string_view("/._-+=:,@%").find(c) != std::string_view::npos)) safe = false;
    if (safe) return text;
    std::string quoted = "'";
    for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return quoted + "'";
}

}  // namespace moequant::cli
