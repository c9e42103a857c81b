// A compiled PCRE2 regular expression over UTF-8 with Unicode classes (\p{L}, \s, ...), as
// tokenizer.json patterns are written for (the reference library uses Oniguruma).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace moequant::tokenization {

class UnicodeRegex {
public:
    // Error(input) naming `where` when the pattern does not compile.
    UnicodeRegex(const std::string& pattern, const std::string& where);

    // Calls found(begin, end) for every non-overlapping match in `text`, left to right (an
    // empty match moves on by one character).
    void for_each_match(std::string_view text, const std::function<void(std::size_t, std::size_t)>& found) const;

private:
    struct Code;
    std::shared_ptr<const Code> code_;
};

}  // namespace moequant::tokenization
