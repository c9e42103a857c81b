// tokenizer.json "normalizer": Sequence, NFC/NFD/NFKC/NFKD, Prepend, Replace, Lowercase, Strip.
#pragma once

#include "unicode_regex.hpp"

#include <boost/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace moequant::tokenization {

class Normalizer {
public:
    // Null JSON: no normalization. Error(input) for an unsupported type.
    explicit Normalizer(const boost::json::value& json);
    std::string apply(std::string text) const;
    bool empty() const noexcept { return steps_.empty(); }

private:
    struct Step {
        enum Kind { nfc, nfd, nfkc, nfkd, prepend, replace, lowercase, strip } kind;
        std::string text;                    // prepend: the prefix; replace: the replacement
        std::optional<UnicodeRegex> pattern;  // replace
        bool left = false, right = false;     // strip
    };
    void add(const boost::json::value& json);
    std::vector<Step> steps_;
};

}  // namespace moequant::tokenization
