#include "normalizer.hpp"

#include "json_fields.hpp"

#include <utf8proc.h>

#include <cstdlib>

namespace moequant::tokenization {

std::string pattern_regex(const boost::json::value& pattern, const std::string& where) {
    const auto& o = as_object(pattern, where + ".pattern");
    if (const auto* s = o.if_contains("String"); s && s->is_string()) {
        std::string escaped;
        for (char c : s->get_string()) {
            if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) escaped += '\\';
            escaped += c;
        }
        return escaped;
    }
    if (const auto* r = o.if_contains("Regex"); r && r->is_string()) return std::string(r->get_string());
    bad_tokenizer(where + ".pattern must be {\"String\": ...} or {\"Regex\": ...}");
}

namespace {

std::string unicode_map(const std::string& text, int options) {
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                            static_cast<utf8proc_ssize_t>(text.size()), &out,
                                            static_cast<utf8proc_option_t>(options));
    if (n < 0) throw Error(ErrorKind::input, std::string("cannot normalize the text: ") + utf8proc_errmsg(n), {.code = "BadText"});
    std::string result(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
    std::free(out);
    return result;
}

std::string lowercase(const std::string& text) {
    std::string out;
    utf8proc_int32_t c = 0;
    for (std::size_t at = 0; at < text.size();) {
        const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + at),
                                        static_cast<utf8proc_ssize_t>(text.size() - at), &c);
        if (n <= 0) throw Error(ErrorKind::input, "the text is not valid UTF-8", {.code = "BadText"});
        utf8proc_uint8_t buf[4];
        const auto len = utf8proc_encode_char(utf8proc_tolower(c), buf);
        out.append(reinterpret_cast<const char*>(buf), static_cast<std::size_t>(len));
        at += static_cast<std::size_t>(n);
    }
    return out;
}

bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

}  // namespace

Normalizer::Normalizer(const boost::json::value& json) {
    if (!json.is_null()) add(json);
}

void Normalizer::add(const boost::json::value& json) {
    const std::string where = "normalizer";
    const std::string type = type_of(json, where);
    const auto& o = json.get_object();
    if (type == "Sequence") {
        const auto* list = o.if_contains("normalizers");
        if (!list || !list->is_array()) bad_tokenizer("normalizer Sequence has no 'normalizers' list");
        for (const auto& n : list->get_array()) add(n);
    } else if (type == "NFC") {
        steps_.push_back({Step::nfc});
    } else if (type == "NFD") {
        steps_.push_back({Step::nfd});
    } else if (type == "NFKC") {
        steps_.push_back({Step::nfkc});
    } else if (type == "NFKD") {
        steps_.push_back({Step::nfkd});
    } else if (type == "Prepend") {
        steps_.push_back({Step::prepend, string_field(o, "prepend", where + " Prepend", {}, true)});
    } else if (type == "Replace") {
        const auto* pattern = o.if_contains("pattern");
        if (!pattern) bad_tokenizer("normalizer Replace has no 'pattern'");
        Step s{Step::replace, string_field(o, "content", where + " Replace", {}, true)};
        s.pattern.emplace(pattern_regex(*pattern, "normalizer Replace"), "normalizer Replace");
        steps_.push_back(std::move(s));
    } else if (type == "Lowercase") {
        steps_.push_back({Step::lowercase});
    } else if (type == "Strip") {
        Step s{Step::strip};
        s.left = bool_field(o, "strip_left", true);
        s.right = bool_field(o, "strip_right", true);
        steps_.push_back(std::move(s));
    } else {
        bad_tokenizer("normalizer '" + type + "' is not supported");
    }
}

std::string Normalizer::apply(std::string text) const {
    for (const auto& s : steps_) {
        switch (s.kind) {
            case Step::nfc: text = unicode_map(text, UTF8PROC_STABLE | UTF8PROC_COMPOSE); break;
            case Step::nfd: text = unicode_map(text, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE); break;
            case Step::nfkc: text = unicode_map(text, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT); break;
            case Step::nfkd: text = unicode_map(text, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT); break;
            case Step::prepend:
                if (!text.empty()) text = s.text + text;
                break;
            case Step::replace: {
                std::string out;
                std::size_t last = 0;
                s.pattern->for_each_match(text, [&](std::size_t b, std::size_t e) {
                    out.append(text, last, b - last);
                    out += s.text;
                    last = e;
                });
                out.append(text, last, std::string::npos);
                text = std::move(out);
                break;
            }
            case Step::lowercase: text = lowercase(text); break;
            case Step::strip: {
                std::size_t b = 0, e = text.size();
                if (s.left) while (b < e && is_space(static_cast<unsigned char>(text[b]))) ++b;
                if (s.right) while (e > b && is_space(static_cast<unsigned char>(text[e - 1]))) --e;
                text = text.substr(b, e - b);
                break;
            }
        }
    }
    return text;
}

}  // namespace moequant::tokenization
