#include "pre_tokenizer.hpp"

#include "byte_level.hpp"
#include "json_fields.hpp"

namespace moequant::tokenization {

namespace {

// GPT-2's word regex (the ByteLevel pre-tokenizer's with use_regex).
constexpr const char* gpt2_pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Span {
    std::size_t begin, end;
    bool match;
};

// The pieces of `text` left by cutting at the delimiter spans, per the split behaviour.
std::vector<std::string> cut(const std::string& text, std::vector<Span> spans, bool merge_previous, bool merge_next,
                             bool remove, bool contiguous) {
    std::vector<std::string> out;
    if (contiguous) {  // adjacent delimiters form one piece
        std::vector<Span> merged;
        for (const Span& s : spans) {
            if (!merged.empty() && merged.back().match && s.match) merged.back().end = s.end;
            else merged.push_back(s);
        }
        spans = std::move(merged);
    }
    bool pending_next = false;  // the last piece is a delimiter waiting for the next piece
    for (const Span& s : spans) {
        std::string piece = text.substr(s.begin, s.end - s.begin);
        if (s.match && remove) continue;
        if (s.match && merge_previous && !out.empty()) {
            out.back() += piece;
            continue;
        }
        if (pending_next) {
            out.back() += piece;
            pending_next = false;
        } else {
            out.push_back(std::move(piece));
        }
        if (s.match && merge_next) pending_next = true;
    }
    std::erase_if(out, [](const std::string& p) { return p.empty(); });
    return out;
}

std::vector<Span> spans_of(const std::string& text, const std::vector<std::pair<std::size_t, std::size_t>>& matches,
                           bool invert) {
    std::vector<Span> spans;
    std::size_t last = 0;
    for (const auto& [b, e] : matches) {
        if (b > last) spans.push_back({last, b, invert});
        spans.push_back({b, e, !invert});
        last = e;
    }
    if (last < text.size()) spans.push_back({last, text.size(), invert});
    return spans;
}

}  // namespace

PreTokenizer::PreTokenizer(const boost::json::value& json) {
    if (!json.is_null()) add(json);
}

void PreTokenizer::add(const boost::json::value& json) {
    const std::string type = type_of(json, "pre_tokenizer");
    const auto& o = json.get_object();
    const std::string where = "pre_tokenizer " + type;
    if (type == "Sequence") {
        const auto* list = o.if_contains("pretokenizers");
        if (!list || !list->is_array()) bad_tokenizer("pre_tokenizer Sequence has no 'pretokenizers' list");
        for (const auto& p : list->get_array()) add(p);
    } else if (type == "Split") {
        const auto* pattern = o.if_contains("pattern");
        if (!pattern) bad_tokenizer(where + " has no 'pattern'");
        Step s{Step::split};
        s.pattern.emplace(pattern_regex(*pattern, where), where);
        const std::string behavior = string_field(o, "behavior", where, "Isolated");
        if (behavior == "Removed") s.behavior = Behavior::removed;
        else if (behavior == "Isolated") s.behavior = Behavior::isolated;
        else if (behavior == "MergedWithPrevious") s.behavior = Behavior::merged_with_previous;
        else if (behavior == "MergedWithNext") s.behavior = Behavior::merged_with_next;
        else if (behavior == "Contiguous") s.behavior = Behavior::contiguous;
        else bad_tokenizer(where + ": behavior '" + behavior + "' is not known");
        s.invert = bool_field(o, "invert", false);
        steps_.push_back(std::move(s));
    } else if (type == "ByteLevel") {
        Step s{Step::byte_level};
        s.prefix_space = bool_field(o, "add_prefix_space", true);
        if (bool_field(o, "use_regex", true)) s.pattern.emplace(gpt2_pattern, where);
        steps_.push_back(std::move(s));
    } else if (type == "Metaspace") {
        Step s{Step::metaspace};
        s.replacement = string_field(o, "replacement", where, "\u2581");
        const std::string scheme = string_field(o, "prepend_scheme", where,
                                                bool_field(o, "add_prefix_space", true) ? "always" : "never");
        if (scheme == "always") s.prepend = Step::Prepend::always;
        else if (scheme == "first") s.prepend = Step::Prepend::first;
        else if (scheme == "never") s.prepend = Step::Prepend::never;
        else bad_tokenizer(where + ": prepend_scheme '" + scheme + "' is not known");
        s.split_on_replacement = bool_field(o, "split", true);
        steps_.push_back(std::move(s));
    } else if (type == "Digits") {
        Step s{Step::digits};
        s.individual_digits = bool_field(o, "individual_digits", false);
        steps_.push_back(std::move(s));
    } else {
        bad_tokenizer("pre_tokenizer '" + type + "' is not supported");
    }
}

std::vector<std::string> PreTokenizer::run(const Step& step, const std::string& piece, bool first) const {
    std::vector<std::pair<std::size_t, std::size_t>> matches;
    switch (step.kind) {
        case Step::split: {
            step.pattern->for_each_match(piece, [&](std::size_t b, std::size_t e) { matches.emplace_back(b, e); });
            const Behavior b = step.behavior;
            return cut(piece, spans_of(piece, matches, step.invert), b == Behavior::merged_with_previous,
                       b == Behavior::merged_with_next, b == Behavior::removed, b == Behavior::contiguous);
        }
        case Step::byte_level: {
            std::string text = step.prefix_space && !piece.starts_with(' ') ? " " + piece : piece;
            std::vector<std::string> words;
            if (step.pattern)
                step.pattern->for_each_match(text, [&](std::size_t b, std::size_t e) { words.push_back(text.substr(b, e - b)); });
            else
                words.push_back(text);
            for (auto& w : words) w = to_byte_level(w);
            return words;
        }
        case Step::metaspace: {
            std::string text;
            for (char c : piece) {
                if (c == ' ') text += step.replacement;
                else text += c;
            }
            const bool prepend = step.prepend == Step::Prepend::always || (step.prepend == Step::Prepend::first && first);
            if (prepend && !text.starts_with(step.replacement)) text = step.replacement + text;
            if (!step.split_on_replacement) return {text};
            for (std::size_t at = text.find(step.replacement); at != std::string::npos;
                 at = text.find(step.replacement, at + step.replacement.size()))
                matches.emplace_back(at, at + step.replacement.size());
            return cut(text, spans_of(text, matches, false), false, true, false, false);
        }
        case Step::digits: {
            for (std::size_t i = 0; i < piece.size(); ++i)
                if (piece[i] >= '0' && piece[i] <= '9') matches.emplace_back(i, i + 1);
            return cut(piece, spans_of(piece, matches, false), false, false, false, !step.individual_digits);
        }
    }
    return {piece};
}

std::vector<std::string> PreTokenizer::apply(const std::string& text, bool first) const {
    std::vector<std::string> pieces{text};
    for (const Step& step : steps_) {
        std::vector<std::string> next;
        for (std::size_t i = 0; i < pieces.size(); ++i)
            for (auto& p : run(step, pieces[i], first && i == 0)) next.push_back(std::move(p));
        pieces = std::move(next);
    }
    std::erase_if(pieces, [](const std::string& p) { return p.empty(); });
    return pieces;
}

}  // namespace moequant::tokenization
