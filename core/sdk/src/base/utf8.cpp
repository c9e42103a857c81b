#include <moequant/utf8.hpp>

namespace moequant {

std::size_t utf8_sequence(std::string_view text, std::size_t at, char32_t& code_point) noexcept {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[at + k]); };
    const unsigned char c = byte(0);
    if (c < 0x80) {
        code_point = c;
        return 1;
    }
    std::size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        code_point = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        code_point = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;  // no overlong 3-byte forms
        if (c == 0xED) hi = 0x9F;  // no UTF-16 surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        code_point = c & 0x07;
        if (c == 0xF0) lo = 0x90;  // no overlong 4-byte forms
        if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
        return 0;
    }
    if (at + len > text.size() || byte(1) < lo || byte(1) > hi) return 0;
    for (std::size_t k = 1; k < len; ++k) {
        if (byte(k) < 0x80 || byte(k) > 0xBF) return 0;
        code_point = (code_point << 6) | (byte(k) & 0x3F);
    }
    return len;
}

std::optional<std::size_t> find_invalid_utf8(std::string_view text) noexcept {
    std::size_t i = 0;
    char32_t code_point = 0;
    while (i < text.size()) {
        const std::size_t len = utf8_sequence(text, i, code_point);
        if (len == 0) return i;
        i += len;
    }
    return std::nullopt;
}

}  // namespace moequant
