// tokenizer.json "pre_tokenizer": Sequence, Split (regex or string, every split behaviour,
// invert), ByteLevel (GPT-2 regex when use_regex, prefix space, byte alphabet), Metaspace and
// Digits. Splits a normalized text into the words the model encodes one by one.
#pragma once

#include "unicode_regex.hpp"

#include <boost/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace moequant::tokenization {

class PreTokenizer {
public:
    // Null JSON: the whole text is one word. Error(input) for an unsupported type or option.
    explicit PreTokenizer(const boost::json::value& json);
    // `first`: the text is the first section of the input (Metaspace's prepend_scheme "first").
    std::vector<std::string> apply(const std::string& text, bool first) const;

private:
    enum class Behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };
    struct Step {
        enum Kind { split, byte_level, metaspace, digits } kind;
        std::optional<UnicodeRegex> pattern;  // split; byte_level with use_regex
        Behavior behavior = Behavior::isolated;
        bool invert = false;
        bool prefix_space = false;            // byte_level add_prefix_space
        std::string replacement;              // metaspace
        enum class Prepend { always, first, never } prepend = Prepend::always;
        bool split_on_replacement = true;     // metaspace
        bool individual_digits = false;       // digits
    };
    void add(const boost::json::value& json);
    std::vector<std::string> run(const Step& step, const std::string& piece, bool first) const;
    std::vector<Step> steps_;
};

}  // namespace moequant::tokenization
