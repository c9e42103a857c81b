// tokenizer.json "added_tokens": strings matched in the text before the model sees it (special
// tokens such as <|im_start|>, and added words), leftmost-longest, each becoming its own id.
// Tokens with normalized=false are matched in the raw text, the others in the normalized text.
#pragma once

#include <boost/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace moequant::tokenization {

class AddedTokens {
public:
    explicit AddedTokens(const boost::json::value& json);

    struct Segment {
        std::string text;                // plain text (empty when this is a token)
        std::optional<std::int32_t> id;  // the token's id
    };
    // Splits `text` on the tokens whose `normalized` flag equals `normalized`.
    std::vector<Segment> split(const std::string& text, bool normalized) const;

    std::optional<std::int32_t> id(std::string_view content) const;
    std::int32_t max_id() const noexcept { return max_id_; }

private:
    struct Token {
        std::string content;
        std::int32_t id;
        bool single_word, lstrip, rstrip, normalized;
    };
    std::vector<Token> tokens_;
    std::unordered_map<unsigned char, std::vector<std::size_t>> by_first_byte_;  // longest first
    std::int32_t max_id_ = -1;
};

}  // namespace moequant::tokenization
