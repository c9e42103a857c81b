#include "byte_level.hpp"

#include <array>

namespace moequant::tokenization {

namespace {

std::string utf8(char32_t c) {
    std::string s;
    if (c < 0x80) {
        s += static_cast<char>(c);
    } else {  // the alphabet stays below U+0800
        s += static_cast<char>(0xC0 | (c >> 6));
        s += static_cast<char>(0x80 | (c & 0x3F));
    }
    return s;
}

const std::array<std::string, 256>& alphabet() {
    static const std::array<std::string, 256> table = [] {
        std::array<std::string, 256> t;
        char32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            t[static_cast<std::size_t>(b)] = utf8(printable ? static_cast<char32_t>(b) : next++);
        }
        return t;
    }();
    return table;
}

}  // namespace

std::string to_byte_level(std::string_view bytes) {
    const auto& table = alphabet();
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char b : bytes) out += table[b];
    return out;
}

}  // namespace moequant::tokenization
