#include "added_tokens.hpp"

#include "json_fields.hpp"

#include <algorithm>
#include <cctype>

namespace moequant::tokenization {

namespace {

bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
// Word characters for single_word: ASCII letters, digits, '_' and any non-ASCII character.
bool is_word(unsigned char c) { return std::isalnum(c) || c == '_' || c >= 0x80; }

}  // namespace

AddedTokens::AddedTokens(const boost::json::value& json) {
    if (json.is_null()) return;
    if (!json.is_array()) bad_tokenizer("added_tokens must be a list");
    for (const auto& t : json.get_array()) {
        const auto& o = as_object(t, "added_tokens[]");
        Token token;
        token.content = string_field(o, "content", "added_tokens[]", {}, true);
        const auto* id = o.if_contains("id");
        if (!id || !id->is_int64()) bad_tokenizer("added token '" + token.content + "' has no integer id");
        token.id = static_cast<std::int32_t>(id->get_int64());
        token.single_word = bool_field(o, "single_word", false);
        token.lstrip = bool_field(o, "lstrip", false);
        token.rstrip = bool_field(o, "rstrip", false);
        token.normalized = bool_field(o, "normalized", !bool_field(o, "special", false));
        if (token.content.empty()) bad_tokenizer("added token " + std::to_string(token.id) + " is empty");
        max_id_ = std::max(max_id_, token.id);
        tokens_.push_back(std::move(token));
    }
    for (std::size_t i = 0; i < tokens_.size(); ++i)
        by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
    for (auto& [byte, list] : by_first_byte_)
        std::stable_sort(list.begin(), list.end(),
                         [&](std::size_t a, std::size_t b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
}

std::optional<std::int32_t> AddedTokens::id(std::string_view content) const {
    for (const auto& t : tokens_)
        if (t.content == content) return t.id;
    return std::nullopt;
}

std::vector<AddedTokens::Segment> AddedTokens::split(const std::string& text, bool normalized) const {
    std::vector<Segment> out;
    std::size_t plain_start = 0;
    auto flush = [&](std::size_t end) {
        if (end > plain_start) out.push_back({text.substr(plain_start, end - plain_start), std::nullopt});
    };
    for (std::size_t at = 0; at < text.size();) {
        const Token* found = nullptr;
        if (auto it = by_first_byte_.find(static_cast<unsigned char>(text[at])); it != by_first_byte_.end())
            for (std::size_t i : it->second) {
                const Token& t = tokens_[i];
                if (t.normalized != normalized || text.compare(at, t.content.size(), t.content) != 0) continue;
                const std::size_t end = at + t.content.size();
                if (t.single_word && ((at > 0 && is_word(static_cast<unsigned char>(text[at - 1]))) ||
                                      (end < text.size() && is_word(static_cast<unsigned char>(text[end])))))
                    continue;
                found = &t;
                break;
            }
        if (!found) {
            ++at;
            continue;
        }
        std::size_t begin = at, end = at + found->content.size();
        if (found->lstrip)
            while (begin > plain_start && is_space(static_cast<unsigned char>(text[begin - 1]))) --begin;
        if (found->rstrip)
            while (end < text.size() && is_space(static_cast<unsigned char>(text[end]))) ++end;
        flush(begin);
        out.push_back({{}, found->id});
        plain_start = at = end;
    }
    flush(text.size());
    return out;
}

}  // namespace moequant::tokenization
