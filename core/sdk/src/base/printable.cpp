#include <moequant/printable.hpp>
#include <moequant/utf8.hpp>

#include <cstdio>

namespace moequant {
namespace {

// Characters that move the cursor or reorder text although they are valid UTF-8.
bool acts_on_terminal(char32_t cp) noexcept {
    return (cp >= 0x80 && cp <= 0x9F) ||                 // C1 controls (CSI is U+009B)
           cp == 0x2028 || cp == 0x2029 ||               // line and paragraph separators
           cp == 0x200E || cp == 0x200F || cp == 0x061C ||  // direction marks
           (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);  // bidi overrides
}

void append_hex_byte(std::string& out, unsigned char c) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    out += buf;
}

std::string escaped(std::string_view s, bool escape_backslash) {
    std::string out;
    out.reserve(s.size());
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            if (c < 0x20 || c == 0x7F)
                append_hex_byte(out, c);
            else if (c == '\\' && escape_backslash)
                out += "\\\\";
            else
                out += static_cast<char>(c);
            ++i;
            continue;
        }
        char32_t cp = 0;
        const std::size_t len = utf8_sequence(s, i, cp);
        if (len == 0) {
            append_hex_byte(out, c);
            ++i;
        } else if (acts_on_terminal(cp)) {
            char buf[16];
            std::snprintf(buf, sizeof buf, "\\u{%04x}", static_cast<unsigned>(cp));
            out += buf;
            i += len;
        } else {
            out.append(s.substr(i, len));
            i += len;
        }
    }
    return out;
}

}  // namespace

std::string printable_name(std::string_view name) { return escaped(name, true); }

std::string printable_text(std::string_view text) { return escaped(text, false); }

}  // namespace moequant
